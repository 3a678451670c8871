#pragma once

// What an inference request's JSON must pass before nlohmann's parser builds anything from it
// (kserve_protocol.cpp's parse_infer_request): the parser would let some bodies through, and
// pay dearly for others.

#include <nlohmann/json.hpp>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/service/kserve_protocol.hpp"

namespace gpucap::service::kserve::detail {

// What the pre-scan found that the parser must know: the tokens of numbers that are not finite,
// if any, and the long flat arrays of numbers it read itself, each rewritten as a marker string.
struct JsonHeaderScan {
  // Empty when the header holds neither: parse it as it is. Otherwise the header with each token
  // and each such array replaced by a marker string: `marker_nuls` NUL characters (escaped), then
  // the token's canonical spelling (NaN, Infinity, -Infinity) or '[' and the array's index.
  std::string rewritten;
  // One more than the longest run of escaped NULs (\u0000) in any of the client's own strings, so
  // that no string the client wrote can equal a marker.
  std::size_t marker_nuls = 1;
  bool non_finite = false;  // the rewritten text holds NaN or Infinity markers
  // The arrays of numbers, as nlohmann's parser builds them (an unsigned or signed integer where
  // the client wrote one, else a double), by marker index; parse_json_header moves them in.
  std::vector<nlohmann::json> arrays;
};

// The fewest numbers an array needs for the pre-scan to read it itself. An image as JSON numbers
// (1x3x224x224: 150,528) costs nlohmann's lexer and strtod 20-50 ms on the development VM; the
// pre-scan's strict JSON number grammar and std::from_chars build the same values in a fraction.
inline constexpr std::size_t kMinFastArrayValues = 256;

// The most NULs in a row a client's string may hold beside such a token; past it the request is
// refused (400) rather than given markers of its length, which it could make as long as its body
// for every token.
inline constexpr std::size_t kMaxNulRunBesideTokens = 64;
// The most the markers may grow a header: the text the parser reads stays within this many times
// the client's (and the slack), so memory and time stay proportional to the body. A token becomes
// 2 + 6·n bytes and its spelling, n the NULs a marker needs (one more than the longest run in the
// client's strings): an array of "NaN" grows 3 times with none in them, of "Inf" 4.25 times.
inline constexpr std::size_t kMaxMarkedTextFactor = 5;
inline constexpr std::size_t kMarkedTextSlackBytes = 64 * 1024;

// ProtocolError(400) for a JSON header (`text`) that holds a NUL byte, nests deeper than
// kMaxJsonDepth, or holds more values than `model` could take; `not_json` starts the NUL's
// message. One pass over the text, strings skipped.
//
// The same pass finds the tokens that Triton's parser (RapidJSON's kParseNanAndInfFlag) takes for
// numbers that are not finite and JSON lacks: NaN, Inf and Infinity, each optionally after '-', where
// a value stands (in an array, or after an object's colon). Python's json module and python-rapidjson
// (which tritonclient.http encodes with) write them for a float array holding nan or inf. nlohmann's
// parser cannot read them, so they come back rewritten as marker strings (JsonHeaderScan), which
// parse_json_header turns into the doubles.
//
// It also reads every array of at least `min_fast_array` numbers and nothing else (flat, each
// number in JSON's strict grammar) into the values nlohmann's parser would build for it, once the
// value count is within the model's bound; an array with a number beyond a double's range (or too
// small for one) is left to the parser, and so are all of them beside a client string of
// kMaxNulRunBesideTokens or more NULs in a row.
[[nodiscard]] JsonHeaderScan check_json_before_parsing(std::string_view text, const std::string& not_json,
                                                       bool header_length_given, const ModelMetadata& model,
                                                       std::size_t min_fast_array = kMinFastArrayValues);

// Parses the JSON header: `text` itself, or the scan's rewritten text, whose marker strings (and
// no string of the client's) become NaN, the infinities and the scan's arrays: the document
// nlohmann::json::parse(text) would give, read with RapidJSON's NaN and Infinity. Throws what
// nlohmann::json::parse throws, with the message it gives for `text` with NaN markers alone
// (positions shift only by those).
[[nodiscard]] nlohmann::json parse_json_header(std::string_view text, JsonHeaderScan& scan);

}  // namespace gpucap::service::kserve::detail
