#pragma once

// What an inference request's JSON must pass before nlohmann's parser builds anything from it
// (kserve_protocol.cpp's parse_infer_request): the parser would let some bodies through, and
// pay dearly for others.

#include <string>
#include <string_view>

#include "gpucap/service/kserve_protocol.hpp"

namespace gpucap::service::kserve::detail {

// ProtocolError(400) for a JSON header (`text`) that holds a NUL byte, nests deeper than
// kMaxJsonDepth, or holds more values than `model` could take; `not_json` starts the NUL's
// message. One pass over the text, strings skipped.
void check_json_before_parsing(std::string_view text, const std::string& not_json, bool header_length_given,
                               const ModelMetadata& model);

}  // namespace gpucap::service::kserve::detail
