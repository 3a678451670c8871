#include "http_common.hpp"

#include "gpucap/core/text.hpp"

namespace gpucap::service::detail {

bool bearer_matches(const httplib::Request& request, std::string_view token) {
  const auto header = request.get_header_value("Authorization");
  constexpr std::string_view scheme = "Bearer ";
  if (!header.starts_with(scheme)) return false;
  const auto given = trim(std::string_view(header).substr(scheme.size()));
  if (given.size() != token.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < given.size(); ++i) difference |= static_cast<unsigned char>(given[i] ^ token[i]);
  return difference == 0;
}

}  // namespace gpucap::service::detail
