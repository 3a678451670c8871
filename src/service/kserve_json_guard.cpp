#include "kserve_json_guard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace gpucap::service::kserve::detail {
namespace {

// A token of a number that is not finite, where a value stands: text[begin, end) becomes a marker
// string ending in `spelling`.
struct NonFinite {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::string_view spelling;
};

constexpr std::string_view kNan = "NaN";
constexpr std::string_view kInfinity = "Infinity";
constexpr std::string_view kMinusInfinity = "-Infinity";

// The token that starts at text[i] (NaN, Inf, Infinity, each optionally after '-'; RapidJSON
// reads "-NaN" as NaN), if one does and ends there, before a letter or digit would run on.
std::optional<NonFinite> non_finite_at(std::string_view text, std::size_t i) {
  const bool minus = text[i] == '-';
  const std::string_view rest = text.substr(minus ? i + 1 : i);
  NonFinite token{i, 0, {}};
  if (rest.starts_with("NaN")) {
    token.end = text.size() - rest.size() + 3;
    token.spelling = kNan;
  } else if (rest.starts_with("Inf")) {
    token.end = text.size() - rest.size() + (rest.starts_with("Infinity") ? 8 : 3);
    token.spelling = minus ? kMinusInfinity : kInfinity;
  } else {
    return std::nullopt;
  }
  if (token.end < text.size() && std::isalnum(static_cast<unsigned char>(text[token.end])) != 0) return std::nullopt;
  return token;
}

bool json_whitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

struct HeaderScan {
  std::uint64_t values = 0;  // about how many values the parser would build
  std::vector<NonFinite> non_finite;
  std::size_t longest_nul_run = 0;  // escaped NULs (\u0000) in a row in one of the client's strings
};

// What nlohmann's parser would let through or pay dearly for, refused in one pass over the header
// before it builds anything: nesting deeper than kMaxJsonDepth (a 10,000-deep array is cheap to
// send and costs a DOM node per level), and a NUL byte, which the parser takes as the end of its
// input, so "{...}\0junk" would parse; JSON text never holds a raw NUL. Strings are skipped.
// Counts about how many values the parser would build (commas and arrays or objects outside
// strings: at least the values less one per array or object), for max_json_values, and finds the
// tokens of numbers that are not finite where a value stands (after '[', ':' or an array's ',').
HeaderScan check_json_header(std::string_view text, const std::string& not_json, bool header_length_given) {
  HeaderScan scan;
  std::string open;  // the containers open at this point, '[' or '{', at most kMaxJsonDepth
  bool in_string = false;
  bool escaped = false;
  std::size_t nul_run = 0;  // escaped NULs in a row so far in this string
  bool value_here = true;   // a value may start at the next significant character
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
        if (c == 'u' && text.substr(i + 1, 4) == "0000") {
          scan.longest_nul_run = std::max(scan.longest_nul_run, ++nul_run);
          i += 4;
        } else {
          nul_run = 0;
        }
      } else if (c == '\\') {
        escaped = true;  // a run of NULs goes on only through the next escape
      } else {
        nul_run = 0;
        if (c == '"') in_string = false;
      }
      continue;
    }
    if (json_whitespace(c)) continue;
    if (value_here && (c == 'N' || c == 'I' || c == '-')) {
      if (const auto token = non_finite_at(text, i)) {
        scan.non_finite.push_back(*token);
        i = token->end - 1;
        value_here = false;
        continue;
      }
    }
    value_here = false;
    if (c == '"') {
      in_string = true;
    } else if (c == ',') {
      ++scan.values;
      value_here = !open.empty() && open.back() == '[';
    } else if (c == ':') {
      value_here = true;
    } else if (c == '[' || c == '{') {
      ++scan.values;
      if (open.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
        throw ProtocolError(kBadRequest, fmt::format("the inference request nests JSON deeper than {} levels", kMaxJsonDepth));
      }
      open.push_back(c);
      value_here = c == '[';
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
    }
  }
  return scan;
}

// The header with each token replaced by its marker string: `nuls` escaped NULs, then its spelling.
std::string with_markers(std::string_view text, const std::vector<NonFinite>& tokens, std::size_t nuls) {
  std::string out;
  out.reserve(text.size() + tokens.size() * (12 + 6 * nuls));
  std::size_t from = 0;
  for (const auto& token : tokens) {
    out.append(text.substr(from, token.begin - from));
    out += '"';
    for (std::size_t i = 0; i < nuls; ++i) out += "\\u0000";
    out.append(token.spelling);
    out += '"';
    from = token.end;
  }
  out.append(text.substr(from));
  return out;
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

JsonHeaderScan check_json_before_parsing(std::string_view text, const std::string& not_json, bool header_length_given,
                                         const ModelMetadata& model) {
  const auto scan = check_json_header(text, not_json, header_length_given);
  const auto values = scan.values;
  if (const auto most = max_json_values(model); most && values > *most) {
    throw ProtocolError(kBadRequest,
                        fmt::format("the inference request's JSON holds about {} values; model '{}' takes at most {} "
                                    "per request (its inputs' elements at batch {}, nested to their full shapes, and "
                                    "the request's fields)",
                                    values, model.name, *most, std::max(model.max_batch_size, 1)));
  }
  JsonHeaderScan result;
  if (scan.non_finite.empty()) return result;
  if (scan.longest_nul_run >= kMaxNulRunBesideTokens) {
    throw ProtocolError(kBadRequest, fmt::format("the inference request holds a string of {} or more NUL characters "
                                                 "(\\u0000) in a row beside a NaN or Infinity token; at most {} are "
                                                 "read beside one",
                                                 kMaxNulRunBesideTokens, kMaxNulRunBesideTokens - 1));
  }
  result.marker_nuls = scan.longest_nul_run + 1;
  result.rewritten = with_markers(text, scan.non_finite, result.marker_nuls);
  return result;
}

nlohmann::json parse_json_header(std::string_view text, const JsonHeaderScan& scan) {
  if (scan.rewritten.empty()) return nlohmann::json::parse(text.begin(), text.end());
  // The markers as the parser decodes them: the NULs, then the spelling. The client's strings hold
  // fewer NULs in a row, so none of them is taken for a marker.
  const std::string nuls(scan.marker_nuls, '\0');
  const std::string nan_marker = nuls + std::string(kNan);
  const std::string infinity_marker = nuls + std::string(kInfinity);
  const std::string minus_infinity_marker = nuls + std::string(kMinusInfinity);
  const nlohmann::json::parser_callback_t restore = [&](int /*depth*/, nlohmann::json::parse_event_t event,
                                                        nlohmann::json& parsed) {
    if (event != nlohmann::json::parse_event_t::value || !parsed.is_string()) return true;
    const auto& string = parsed.get_ref<const std::string&>();
    if (string == nan_marker) {
      parsed = std::numeric_limits<double>::quiet_NaN();
    } else if (string == infinity_marker) {
      parsed = std::numeric_limits<double>::infinity();
    } else if (string == minus_infinity_marker) {
      parsed = -std::numeric_limits<double>::infinity();
    }
    return true;
  };
  return nlohmann::json::parse(scan.rewritten, restore);
}

}  // namespace gpucap::service::kserve::detail
