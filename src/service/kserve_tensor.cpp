#include "gpucap/service/kserve_tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>

namespace gpucap::service::kserve {

// Tensor bytes are the wire's little-endian bytes, used in place (no byte swapping anywhere).
static_assert(std::endian::native == std::endian::little, "gpucap's KServe codec assumes a little-endian host");

namespace {

constexpr std::size_t kLengthPrefixBytes = 4;

struct DatatypeInfo {
  Datatype datatype;
  std::string_view name;
  std::size_t size_bytes;
};

constexpr std::array<DatatypeInfo, 14> kDatatypes{{
    {Datatype::boolean, "BOOL", 1},
    {Datatype::uint8, "UINT8", 1},
    {Datatype::uint16, "UINT16", 2},
    {Datatype::uint32, "UINT32", 4},
    {Datatype::uint64, "UINT64", 8},
    {Datatype::int8, "INT8", 1},
    {Datatype::int16, "INT16", 2},
    {Datatype::int32, "INT32", 4},
    {Datatype::int64, "INT64", 8},
    {Datatype::fp16, "FP16", 2},
    {Datatype::fp32, "FP32", 4},
    {Datatype::fp64, "FP64", 8},
    {Datatype::bytes, "BYTES", 0},
    {Datatype::bf16, "BF16", 2},
}};

const DatatypeInfo& info(Datatype datatype) noexcept { return kDatatypes[static_cast<std::size_t>(datatype)]; }

// Walks the length-prefixed BYTES elements of `data`, calling visit(payload_offset, length) for
// each; false when a prefix or a payload runs past the end.
template <typename Visit>
bool walk_bytes(std::span<const std::byte> data, Visit&& visit) {
  std::size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < kLengthPrefixBytes) return false;
    std::uint32_t length = 0;
    std::memcpy(&length, data.data() + pos, kLengthPrefixBytes);
    pos += kLengthPrefixBytes;
    if (data.size() - pos < length) return false;
    visit(pos, static_cast<std::size_t>(length));
    pos += length;
  }
  return true;
}

void check_same_layout(const Tensor& first, const Tensor& part) {
  const bool same = part.name == first.name && part.datatype == first.datatype &&
                    part.shape.size() == first.shape.size() &&
                    std::equal(part.shape.begin() + 1, part.shape.end(), first.shape.begin() + 1);
  if (!same) {
    throw ProtocolError(kInternalError, fmt::format("cannot batch tensor '{}' {} {} with '{}' {} {}", first.name,
                                                    to_string(first.datatype), shape_string(first.shape), part.name,
                                                    to_string(part.datatype), shape_string(part.shape)));
  }
}

}  // namespace

ProtocolError::ProtocolError(int http_status, const std::string& message)
    : Error(http_status >= 500 ? ErrorCode::internal : ErrorCode::invalid_data, message), http_status_(http_status) {}

std::string_view to_string(Datatype datatype) noexcept { return info(datatype).name; }

std::optional<Datatype> datatype_from_string(std::string_view name) noexcept {
  for (const auto& entry : kDatatypes) {
    if (entry.name == name) return entry.datatype;
  }
  return std::nullopt;
}

std::size_t element_size_bytes(Datatype datatype) noexcept { return info(datatype).size_bytes; }

std::optional<std::uint64_t> element_count(std::span<const std::int64_t> shape) noexcept {
  std::uint64_t count = 1;
  for (const auto dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(dim), &count)) return std::nullopt;
  }
  return count;
}

std::string shape_string(std::span<const std::int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

void check_tensor_data(const Tensor& tensor, int http_status) {
  const auto count = element_count(tensor.shape);
  if (!count) {
    throw ProtocolError(http_status,
                        fmt::format("tensor '{}' has an invalid shape {}", tensor.name, shape_string(tensor.shape)));
  }
  if (tensor.datatype == Datatype::bytes) {
    std::uint64_t elements = 0;
    if (!walk_bytes(tensor.data, [&](std::size_t, std::size_t) { ++elements; })) {
      throw ProtocolError(http_status, fmt::format("BYTES tensor '{}' has a length prefix that runs past its {} bytes",
                                                   tensor.name, tensor.data.size()));
    }
    if (elements != *count) {
      throw ProtocolError(http_status, fmt::format("BYTES tensor '{}' has shape {} ({} elements) but holds {}",
                                                   tensor.name, shape_string(tensor.shape), *count, elements));
    }
    return;
  }
  const auto size = element_size_bytes(tensor.datatype);
  if (*count > std::numeric_limits<std::size_t>::max() / size || tensor.data.size() != *count * size) {
    throw ProtocolError(http_status, fmt::format("{} tensor '{}' has shape {} ({} elements) but holds {} bytes",
                                                 to_string(tensor.datatype), tensor.name, shape_string(tensor.shape),
                                                 *count, tensor.data.size()));
  }
}

void append_bytes_element(std::vector<std::byte>& data, std::string_view element) {
  if (element.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw ProtocolError(
        kBadRequest, fmt::format("a BYTES element of {} bytes does not fit its 32-bit length prefix", element.size()));
  }
  const auto length = static_cast<std::uint32_t>(element.size());
  const auto* prefix = reinterpret_cast<const std::byte*>(&length);
  data.insert(data.end(), prefix, prefix + kLengthPrefixBytes);
  const auto* bytes = reinterpret_cast<const std::byte*>(element.data());
  data.insert(data.end(), bytes, bytes + element.size());
}

std::vector<std::string_view> bytes_elements(std::span<const std::byte> data) {
  std::vector<std::string_view> elements;
  const auto* base = reinterpret_cast<const char*>(data.data());
  if (!walk_bytes(data,
                  [&](std::size_t offset, std::size_t length) { elements.emplace_back(base + offset, length); })) {
    throw ProtocolError(kBadRequest,
                        fmt::format("BYTES data of {} bytes has a length prefix that runs past its end", data.size()));
  }
  return elements;
}

float fp16_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = (static_cast<std::uint32_t>(bits) & 0x8000u) << 16;
  const std::uint32_t exponent = (static_cast<std::uint32_t>(bits) >> 10) & 0x1fu;
  const std::uint32_t mantissa = static_cast<std::uint32_t>(bits) & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

float bf16_to_float(std::uint16_t bits) noexcept {
  // BF16 is the upper half of an FP32.
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::int64_t batch_size(std::span<const Tensor> inputs) {
  if (inputs.empty()) throw ProtocolError(kBadRequest, "a batched request needs at least one input");
  std::optional<std::int64_t> batch;
  for (const auto& input : inputs) {
    if (input.shape.empty()) {
      throw ProtocolError(kBadRequest, fmt::format("input '{}' has no batch dimension (shape [])", input.name));
    }
    if (batch && *batch != input.shape.front()) {
      throw ProtocolError(kBadRequest, fmt::format("inputs disagree on the batch size: '{}' has {}, '{}' has {}",
                                                   inputs[0].name, *batch, input.name, input.shape.front()));
    }
    batch = input.shape.front();
  }
  return *batch;
}

BatchLayout batch_layout(std::span<const Tensor* const> parts) {
  if (parts.empty()) throw ProtocolError(kInternalError, "no tensors to batch");
  const Tensor& first = *parts.front();
  if (first.shape.empty()) {
    throw ProtocolError(kInternalError, fmt::format("tensor '{}' has no batch dimension", first.name));
  }
  BatchLayout layout{first.shape, 0};
  layout.shape.front() = 0;
  for (const Tensor* part : parts) {
    check_same_layout(first, *part);
    check_tensor_data(*part, kInternalError);
    layout.shape.front() += part->shape.front();
    layout.bytes += part->data.size();
  }
  return layout;
}

void copy_batch(std::span<const Tensor* const> parts, std::span<std::byte> out) {
  std::size_t offset = 0;
  for (const Tensor* part : parts) {
    if (part->data.size() > out.size() - offset) {
      throw ProtocolError(kInternalError, fmt::format("a batch of {} bytes does not fit its parts", out.size()));
    }
    std::copy(part->data.begin(), part->data.end(), out.begin() + static_cast<std::ptrdiff_t>(offset));
    offset += part->data.size();
  }
  if (offset != out.size()) {
    throw ProtocolError(kInternalError, fmt::format("a batch of {} bytes got {} from its parts", out.size(), offset));
  }
}

Tensor concat_batch(std::span<const Tensor* const> parts) {
  auto layout = batch_layout(parts);
  Tensor batched{parts.front()->name, parts.front()->datatype, std::move(layout.shape), {}};
  batched.data.reserve(layout.bytes);
  for (const Tensor* part : parts) batched.data.insert(batched.data.end(), part->data.begin(), part->data.end());
  return batched;
}

std::vector<Tensor> split_batch(const Tensor& batched, std::span<const std::int64_t> batch_sizes) {
  if (batched.shape.empty()) {
    throw ProtocolError(kInternalError, fmt::format("output '{}' has no batch dimension", batched.name));
  }
  check_tensor_data(batched, kInternalError);
  std::int64_t rows = 0;
  for (const auto size : batch_sizes) {
    if (size < 0) throw ProtocolError(kInternalError, "a negative batch size");
    rows += size;
  }
  if (rows != batched.shape.front()) {
    throw ProtocolError(kInternalError, fmt::format("output '{}' has {} rows but the batch had {}", batched.name,
                                                    batched.shape.front(), rows));
  }
  const std::span<const std::int64_t> row_shape(batched.shape.begin() + 1, batched.shape.end());
  const std::size_t elements_per_row = static_cast<std::size_t>(*element_count(row_shape));

  // Byte offset where each row starts, plus the end: fixed-size rows are arithmetic; BYTES rows
  // are found by walking the length prefixes once.
  std::vector<std::size_t> row_start;
  row_start.reserve(static_cast<std::size_t>(rows) + 1);
  if (batched.datatype == Datatype::bytes) {
    std::size_t element = 0;
    walk_bytes(batched.data, [&](std::size_t offset, std::size_t) {
      if (elements_per_row != 0 && element % elements_per_row == 0) row_start.push_back(offset - kLengthPrefixBytes);
      ++element;
    });
    while (row_start.size() < static_cast<std::size_t>(rows)) row_start.push_back(batched.data.size());  // empty rows
  } else {
    const std::size_t row_bytes = elements_per_row * element_size_bytes(batched.datatype);
    for (std::int64_t r = 0; r < rows; ++r) row_start.push_back(static_cast<std::size_t>(r) * row_bytes);
  }
  row_start.push_back(batched.data.size());

  std::vector<Tensor> pieces;
  pieces.reserve(batch_sizes.size());
  std::size_t row = 0;
  for (const auto size : batch_sizes) {
    Tensor piece{batched.name, batched.datatype, batched.shape, {}};
    piece.shape.front() = size;
    const auto begin = batched.data.begin() + static_cast<std::ptrdiff_t>(row_start[row]);
    row += static_cast<std::size_t>(size);
    const auto end = batched.data.begin() + static_cast<std::ptrdiff_t>(row_start[row]);
    piece.data.assign(begin, end);
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

}  // namespace gpucap::service::kserve
