#include "kserve_json_guard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

namespace gpucap::service::kserve::detail {
namespace {

// What nlohmann's parser would let through or pay dearly for, refused in one pass over the header
// before it builds anything: nesting deeper than kMaxJsonDepth (a 10,000-deep array is cheap to
// send and costs a DOM node per level), and a NUL byte, which the parser takes as the end of its
// input, so "{...}\0junk" would parse; JSON text never holds a raw NUL. Strings are skipped.
// Returns about how many values the parser would build (commas and arrays or objects outside
// strings: at least the values less one per array or object), for max_json_values.
std::uint64_t check_json_header(std::string_view text, const std::string& not_json, bool header_length_given) {
  std::uint64_t values = 0;
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0') {
      throw ProtocolError(kBadRequest, fmt::format("{}: a NUL byte at offset {}{}", not_json, i,
                                    header_length_given ? ""
                                                        : " (binary tensor data needs the "
                                                          "Inference-Header-Content-Length header)"));
    }
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == ',') {
      ++values;
    } else if (c == '[' || c == '{') {
      ++values;
      if (++depth > kMaxJsonDepth) {
        throw ProtocolError(kBadRequest, fmt::format("the inference request nests JSON deeper than {} levels", kMaxJsonDepth));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return values;
}

// The most JSON values a request for `model` needs, as the pre-scan counts them (commas, arrays
// and objects): for each input at the largest batch, its elements and, for data nested to its
// full shape, twice its arrays (one array per index of every dimension but the last, each with a
// comma after it); and room for the request's own fields. A body of megabytes that is mostly
// empty arrays or one-digit numbers would otherwise cost the parser 16 to 80 bytes of memory per
// 2 to 3 bytes it holds before its shape is checked. nullopt when a dimension other than the batch
// is variable (no bound but the body's size).
std::optional<std::uint64_t> max_json_values(const ModelMetadata& model) {
  constexpr std::uint64_t kRequestFields = 4096;
  std::uint64_t most = kRequestFields;
  for (const auto& input : model.inputs) {
    std::uint64_t arrays = 0;
    std::uint64_t elements = 1;  // the product of the dimensions so far
    for (std::size_t i = 0; i < input.shape.size(); ++i) {
      const bool batch = i == 0 && model.max_batch_size > 0;
      const std::int64_t dimension = batch ? model.max_batch_size : input.shape[i];
      if (dimension < 0 || __builtin_add_overflow(arrays, elements, &arrays) ||
          __builtin_mul_overflow(elements, static_cast<std::uint64_t>(dimension), &elements)) {
        return std::nullopt;
      }
    }
    std::uint64_t values = 0;
    if (__builtin_mul_overflow(arrays, std::uint64_t{2}, &values) || __builtin_add_overflow(values, elements, &values) ||
        __builtin_add_overflow(most, values, &most)) {
      return std::nullopt;
    }
  }
  return most;
}

}  // namespace

void check_json_before_parsing(std::string_view text, const std::string& not_json, bool header_length_given,
                               const ModelMetadata& model) {
  const auto values = check_json_header(text, not_json, header_length_given);
  if (const auto most = max_json_values(model); most && values > *most) {
    throw ProtocolError(kBadRequest,
                        fmt::format("the inference request's JSON holds about {} values; model '{}' takes at most {} "
                                    "per request (its inputs' elements at batch {}, nested to their full shapes, and "
                                    "the request's fields)",
                                    values, model.name, *most, std::max(model.max_batch_size, 1)));
  }
}

}  // namespace gpucap::service::kserve::detail
