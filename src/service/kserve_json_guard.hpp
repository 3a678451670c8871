#pragma once

// What an inference request's JSON must pass before nlohmann's parser builds anything from it
// (kserve_protocol.cpp's parse_infer_request): the parser would let some bodies through, and
// pay dearly for others.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gpucap/service/kserve_protocol.hpp"

namespace gpucap::service::kserve::detail {

// ProtocolError(400) for a JSON header (`text`) that holds a NUL byte, nests deeper than
// kMaxJsonDepth, or holds more values than `model` could take; `not_json` starts the NUL's
// message. One pass over the text, strings skipped.
//
// The same pass finds the tokens that Triton's parser (RapidJSON's kParseNanAndInfFlag) takes for
// numbers that are not finite and JSON lacks: NaN, Inf and Infinity, each optionally after '-', where
// a value stands (in an array, or after an object's colon). Python's json.dumps writes them for a
// float array holding nan or inf, so tritonclient sends them. nlohmann's parser cannot read them: when
// there are any, the text comes back with each one replaced by a marker string (kNanMarker, ...),
// which parse_json_header turns into the double; otherwise it comes back empty.
[[nodiscard]] std::string check_json_before_parsing(std::string_view text, const std::string& not_json,
                                                    bool header_length_given, const ModelMetadata& model);

// Markers of the tokens above: a JSON string starting with an escaped NUL, which no client sends
// where a number goes (a FP32 element given as a string is refused anyway).
inline constexpr std::string_view kNanMarker = "\\u0000NaN";
inline constexpr std::string_view kInfinityMarker = "\\u0000Infinity";
inline constexpr std::string_view kMinusInfinityMarker = "\\u0000-Infinity";

// Parses the JSON header: `text`, or `rewritten` when check_json_before_parsing returned one (its
// markers become NaN and the infinities). Throws what nlohmann::json::parse throws.
[[nodiscard]] nlohmann::json parse_json_header(std::string_view text, const std::string& rewritten);

}  // namespace gpucap::service::kserve::detail
