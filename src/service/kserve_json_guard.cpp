#include "kserve_json_guard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <system_error>
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
bool digit(char c) { return c >= '0' && c <= '9'; }

// An array of numbers alone: text[begin, end) from its '[' to one past its ']'.
struct FlatArray {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t values = 0;
};

struct HeaderScan {
  std::uint64_t values = 0;  // about how many values the parser would build
  std::vector<NonFinite> non_finite;
  std::vector<FlatArray> arrays;
  std::size_t longest_nul_run = 0;  // escaped NULs (\u0000) in a row in one of the client's strings
};

// The end of the JSON number that starts at p (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?
// [0-9]+)?), or nullptr if none does. `integer`: it has neither fraction nor exponent.
const char* json_number_end(const char* p, const char* end, bool& integer) {
  const auto digits = [end](const char* q) {
    while (q != end && digit(*q)) ++q;
    return q;
  };
  if (p != end && *p == '-') ++p;
  if (p == end) return nullptr;
  if (*p == '0') {
    ++p;
  } else if (digit(*p)) {
    p = digits(p + 1);
  } else {
    return nullptr;
  }
  integer = true;
  if (p != end && *p == '.') {
    if (++p == end || !digit(*p)) return nullptr;
    p = digits(p + 1);
    integer = false;
  }
  if (p != end && (*p == 'e' || *p == 'E')) {
    if (++p != end && (*p == '+' || *p == '-')) ++p;
    if (p == end || !digit(*p)) return nullptr;
    p = digits(p + 1);
    integer = false;
  }
  return p;
}

// The array whose '[' is text[open] if it holds numbers alone (at least one), each followed by
// whitespace, ',' or ']': where it ends and how many it holds. Only checks the grammar.
std::optional<FlatArray> flat_number_array(std::string_view text, std::size_t open) {
  FlatArray array{open, 0, 0};
  const char* p = text.data() + open + 1;
  const char* const end = text.data() + text.size();
  for (;;) {
    while (p != end && json_whitespace(*p)) ++p;
    bool integer = false;
    p = json_number_end(p, end, integer);
    if (p == nullptr) return std::nullopt;
    ++array.values;
    while (p != end && json_whitespace(*p)) ++p;
    if (p == end) return std::nullopt;
    if (*p == ']') break;
    if (*p != ',') return std::nullopt;
    ++p;
  }
  array.end = static_cast<std::size_t>(p - text.data()) + 1;
  return array;
}

// The value nlohmann's parser builds for the number at p (grammar checked), and where it ends: an
// integer (unsigned when it has no sign) if it has neither fraction nor exponent and fits, else
// the nearest double (strtod's and from_chars' rounding are both correct); nullopt for one beyond
// a double's range or below its smallest, which the parser refuses or reads as strtod does (left
// to it).
std::optional<nlohmann::json> json_number_value(const char*& p, const char* end) {
  bool integer = false;
  const char* const first = p;
  p = json_number_end(first, end, integer);  // the grammar was checked: not nullptr
  if (integer) {
    if (*first == '-') {
      std::int64_t whole = 0;
      if (const auto r = std::from_chars(first, p, whole); r.ec == std::errc() && r.ptr == p) return nlohmann::json(whole);
    } else {
      std::uint64_t whole = 0;
      if (const auto r = std::from_chars(first, p, whole); r.ec == std::errc() && r.ptr == p) return nlohmann::json(whole);
    }
  }
  double value = 0.0;
  if (const auto r = std::from_chars(first, p, value); r.ec != std::errc() || r.ptr != p) return std::nullopt;
  return nlohmann::json(value);
}

// The values of a flat array (flat_number_array), or nullopt if one is left to the parser.
std::optional<nlohmann::json> flat_array_values(std::string_view text, const FlatArray& array) {
  nlohmann::json values = nlohmann::json::array();
  auto& elements = values.get_ref<nlohmann::json::array_t&>();
  elements.reserve(array.values);
  const char* p = text.data() + array.begin + 1;
  const char* const end = text.data() + array.end;
  while (elements.size() < array.values) {
    while (json_whitespace(*p)) ++p;
    auto value = json_number_value(p, end);
    if (!value) return std::nullopt;
    elements.push_back(std::move(*value));
    while (json_whitespace(*p)) ++p;
    ++p;  // ',' or the closing ']'
  }
  return values;
}

// What nlohmann's parser would let through or pay dearly for, refused in one pass over the header
// before it builds anything: nesting deeper than kMaxJsonDepth (a 10,000-deep array is cheap to
// send and costs a DOM node per level), and a NUL byte, which the parser takes as the end of its
// input, so "{...}\0junk" would parse; JSON text never holds a raw NUL. Strings are skipped.
// Counts about how many values the parser would build (commas and arrays or objects outside
// strings: at least the values less one per array or object), for max_json_values, and finds the
// tokens of numbers that are not finite where a value stands (after '[', ':' or an array's ',').
//
// An array of `min_fast_array` numbers or more and nothing else is recorded (flat_number_array)
// and passed over at once, its values counted as the parser would build them.
HeaderScan check_json_header(std::string_view text, const std::string& not_json, bool header_length_given,
                             std::size_t min_fast_array) {
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
    const bool value_position = value_here;
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
      // Only where a value stands: an array where an object's key goes is the parser's to refuse
      // (its marker would be a valid key).
      if (c == '[' && value_position && (text.size() - i) / 2 >= min_fast_array) {  // n numbers: 2n bytes at least
        if (const auto array = flat_number_array(text, i); array && array->values >= min_fast_array) {
          scan.values += array->values - 1;  // the '[' counted one, then one per comma
          scan.arrays.push_back(*array);
          i = array->end - 1;
          continue;
        }
      }
      open.push_back(c);
      value_here = c == '[';
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
    }
  }
  return scan;
}

// A stretch of the header to replace by a marker string: `nuls` escaped NULs, then `spelling`.
struct Replacement {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::string spelling;
};

// The length of a marker string in the header's text: its quotes, `nuls` escaped NULs (six
// characters each) and its spelling.
constexpr std::size_t marker_text_size(std::size_t nuls, std::size_t spelling_size) {
  return 2 + 6 * nuls + spelling_size;
}

// The header with each stretch (in order, apart) replaced by its marker string.
std::string with_markers(std::string_view text, const std::vector<Replacement>& stretches, std::size_t nuls) {
  std::size_t size = text.size();
  for (const auto& stretch : stretches) size += marker_text_size(nuls, stretch.spelling.size());
  std::string out;
  out.reserve(size);
  std::size_t from = 0;
  for (const auto& stretch : stretches) {
    out.append(text.substr(from, stretch.begin - from));
    out += '"';
    for (std::size_t i = 0; i < nuls; ++i) out += "\\u0000";
    out.append(stretch.spelling);
    out += '"';
    from = stretch.end;
  }
  out.append(text.substr(from));
  return out;
}

// The header rewritten for the parser: the non-finite tokens as markers, and with `arrays` (each
// holding its values, or nullopt for one left to the parser) those arrays as markers too.
JsonHeaderScan rewrite(std::string_view text, const HeaderScan& scan, std::size_t nuls,
                       std::vector<std::optional<nlohmann::json>> arrays) {
  JsonHeaderScan result;
  result.marker_nuls = nuls;
  result.non_finite = !scan.non_finite.empty();
  std::vector<Replacement> stretches;
  for (const auto& token : scan.non_finite) stretches.push_back({token.begin, token.end, std::string(token.spelling)});
  for (std::size_t k = 0; k < arrays.size(); ++k) {
    if (!arrays[k]) continue;
    stretches.push_back({scan.arrays[k].begin, scan.arrays[k].end, fmt::format("[{}", result.arrays.size())});
    result.arrays.push_back(std::move(*arrays[k]));
  }
  if (stretches.empty()) return result;
  std::sort(stretches.begin(), stretches.end(), [](const Replacement& a, const Replacement& b) { return a.begin < b.begin; });
  result.rewritten = with_markers(text, stretches, nuls);
  return result;
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
                                         const ModelMetadata& model, std::size_t min_fast_array) {
  const auto scan = check_json_header(text, not_json, header_length_given, std::max<std::size_t>(min_fast_array, 1));
  const auto values = scan.values;
  if (const auto most = max_json_values(model); most && values > *most) {
    throw ProtocolError(kBadRequest,
                        fmt::format("the inference request's JSON holds about {} values; model '{}' takes at most {} "
                                    "per request (its inputs' elements at batch {}, nested to their full shapes, and "
                                    "the request's fields)",
                                    values, model.name, *most, std::max(model.max_batch_size, 1)));
  }
  if (!scan.non_finite.empty() && scan.longest_nul_run >= kMaxNulRunBesideTokens) {
    throw ProtocolError(kBadRequest, fmt::format("the inference request holds a string of {} or more NUL characters "
                                                 "(\\u0000) in a row beside a NaN or Infinity token; at most {} are "
                                                 "read beside one",
                                                 kMaxNulRunBesideTokens, kMaxNulRunBesideTokens - 1));
  }
  // Each token's marker is longer than the token, the more so the more NULs it needs: a text of
  // millions of them beside a string of 60 NULs would take a hundred times its size to read.
  const std::size_t nuls = scan.longest_nul_run + 1;
  std::size_t marker_growth = 0;
  for (const auto& token : scan.non_finite) {
    const std::size_t token_size = token.end - token.begin;
    marker_growth += std::max(marker_text_size(nuls, token.spelling.size()), token_size) - token_size;
  }
  if (text.size() + marker_growth > kMaxMarkedTextFactor * text.size() + kMarkedTextSlackBytes) {
    throw ProtocolError(kBadRequest,
                        fmt::format("the inference request's {} NaN or Infinity tokens, beside a string of {} NUL "
                                    "characters (\\u0000) in a row, would take {} bytes to read, more than {} times its "
                                    "{}-byte JSON: send fewer NULs, or the tensor as binary data",
                                    scan.non_finite.size(), scan.longest_nul_run, text.size() + marker_growth,
                                    kMaxMarkedTextFactor, text.size()));
  }
  // The arrays' values are built only now, within the model's bound; beside a long run of NULs
  // (markers as long) the parser reads them.
  std::vector<std::optional<nlohmann::json>> arrays;
  if (scan.longest_nul_run < kMaxNulRunBesideTokens) {
    for (const auto& array : scan.arrays) arrays.push_back(flat_array_values(text, array));
  }
  return rewrite(text, scan, nuls, std::move(arrays));
}

nlohmann::json parse_json_header(std::string_view text, JsonHeaderScan& scan) {
  if (scan.rewritten.empty()) return nlohmann::json::parse(text.begin(), text.end());
  // The markers as the parser decodes them: the NULs, then the spelling. The client's strings hold
  // fewer NULs in a row, so none of them is taken for a marker.
  const std::string nuls(scan.marker_nuls, '\0');
  const std::string nan_marker = nuls + std::string(kNan);
  const std::string infinity_marker = nuls + std::string(kInfinity);
  const std::string minus_infinity_marker = nuls + std::string(kMinusInfinity);
  const std::string array_marker = nuls + "[";
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
    } else if (string.starts_with(array_marker)) {
      std::size_t k = 0;
      const auto* first = string.data() + array_marker.size();
      const auto r = std::from_chars(first, string.data() + string.size(), k);
      if (r.ec == std::errc() && r.ptr == string.data() + string.size() && k < scan.arrays.size()) {
        parsed = std::move(scan.arrays[k]);
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(scan.rewritten, restore);
  } catch (const nlohmann::json::exception&) {
    if (scan.arrays.empty()) throw;
  }
  scan.arrays.clear();  // not held beside the parser's own reading of them
  // The header is not valid JSON elsewhere: the parser's own message, as it gives it for the text
  // with the NaN markers alone (the arrays' markers would shift its positions).
  auto plain = rewrite(text, check_json_header(text, {}, false, std::numeric_limits<std::size_t>::max()),
                       scan.marker_nuls, {});
  return parse_json_header(text, plain);
}

}  // namespace gpucap::service::kserve::detail
