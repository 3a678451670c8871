#pragma once

// The data of one input of an inference request, from the request to the tensor's bytes: JSON
// elements checked against the input's datatype, or the binary extension's bytes checked against
// its shape (kserve_protocol.cpp's parse_infer_request calls these once the input's name, datatype
// and shape are known).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gpucap/service/kserve_tensor.hpp"

namespace gpucap::service::kserve::detail {

// A JSON value for a message: short, one line, never throwing on odd bytes.
[[nodiscard]] std::string excerpt(const nlohmann::json& value);

// `data` (nested or flat) into `tensor.data`, `count` elements of its datatype; ProtocolError(400)
// for a count that differs, an element of another type or out of its range, and for FP16/BF16,
// which must come as binary.
void fill_from_json(Tensor& tensor, const nlohmann::json& data, std::uint64_t count);

// The one copy of a binary input: `chunk` into `tensor.data`; ProtocolError(400) unless it holds
// exactly `count` elements of the tensor's datatype (for BYTES, well-formed length prefixes; for
// BOOL, bytes of 0 or 1).
void fill_from_binary(Tensor& tensor, std::string_view chunk, std::uint64_t count);

}  // namespace gpucap::service::kserve::detail
