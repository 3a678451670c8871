#include "http_common.hpp"

#include "gpucap/core/text.hpp"

namespace gpucap::service::detail {

bool bearer_matches(const httplib::Request& request, std::string_view token) {
  const auto header = request.get_header_value("Authorization");
  constexpr std::string_view scheme = "bearer ";  // a scheme's name is case-insensitive (RFC 9110 §11.1)
  if (header.size() < scheme.size() || to_lower(std::string_view(header).substr(0, scheme.size())) != scheme) return false;
  const auto given = trim(std::string_view(header).substr(scheme.size()));
  // cpp-httplib 0.11 percent-decodes every header's value as it parses it: the token is compared
  // as that parse would have left it, or a token holding "%41" could never match.
  const auto expected = httplib::detail::decode_url(std::string(token), false);
  // Every byte given is compared, whatever the lengths, so the time taken does not tell the
  // token's length either.
  std::size_t difference = given.size() ^ expected.size();
  for (std::size_t i = 0; i < given.size(); ++i) {
    const char want = i < expected.size() ? expected[i] : '\0';
    difference |= static_cast<unsigned char>(given[i] ^ want);
  }
  return difference == 0;
}

}  // namespace gpucap::service::detail
