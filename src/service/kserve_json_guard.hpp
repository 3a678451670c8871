#pragma once

// What an inference request's JSON must pass before nlohmann's parser builds anything from it
// (kserve_protocol.cpp's parse_infer_request): the parser would let some bodies through, and
// pay dearly for others.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gpucap/service/kserve_protocol.hpp"

namespace gpucap::service::kserve::detail {

// What the pre-scan found that the parser must know: the tokens of numbers that are not finite,
// if any, rewritten as marker strings.
struct JsonHeaderScan {
  // Empty when the header holds no such token: parse it as it is. Otherwise the header with each
  // token replaced by a marker string: `marker_nuls` NUL characters (escaped), then the token's
  // canonical spelling (NaN, Infinity, -Infinity).
  std::string rewritten;
  // One more than the longest run of escaped NULs (\u0000) in any of the client's own strings, so
  // that no string the client wrote can equal a marker.
  std::size_t marker_nuls = 1;
};

// The most NULs in a row a client's string may hold beside such a token; past it the request is
// refused (400) rather than given markers of its length, which it could make as long as its body
// for every token.
inline constexpr std::size_t kMaxNulRunBesideTokens = 64;

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
[[nodiscard]] JsonHeaderScan check_json_before_parsing(std::string_view text, const std::string& not_json,
                                                       bool header_length_given, const ModelMetadata& model);

// Parses the JSON header: `text` itself, or the scan's rewritten text, whose marker strings (and
// no string of the client's) become NaN and the infinities. Throws what nlohmann::json::parse throws.
[[nodiscard]] nlohmann::json parse_json_header(std::string_view text, const JsonHeaderScan& scan);

}  // namespace gpucap::service::kserve::detail
