#pragma once
// Tensors of the KServe v2 / Open Inference Protocol, as bytes: datatypes, element sizes, the
// BYTES encoding, and the batch helpers the server uses to stack requests and split results.
//
// Sources: KServe's docs/predict-api/v2/required_api.md ("Tensor Data Types"), and Triton's
// docs/protocol/extension_binary_data.md, which fixes the byte layout every part of gpucap uses:
// row-major, little-endian, no stride or padding; BOOL is one byte, 0 or 1; a BYTES element is a
// 4-byte little-endian unsigned length followed by that many bytes. BF16 is Triton's addition.
// Keeping tensors in exactly this layout means a binary request's data is copied once, straight
// from the HTTP body, and a binary response is the data itself.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/core/error.hpp"

namespace gpucap::service::kserve {

// A request the protocol refuses (400) or a server-side fault in building an answer (500). The
// message is one line, fit for {"error": "..."}. It is a gpucap::Error (invalid_data for a 4xx,
// internal for a 5xx) so that code outside the HTTP layer can treat it like any other.
class ProtocolError : public Error {
 public:
  ProtocolError(int http_status, const std::string& message);
  [[nodiscard]] int http_status() const noexcept { return http_status_; }

 private:
  int http_status_;
};

inline constexpr int kBadRequest = 400;
inline constexpr int kInternalError = 500;

// The datatype names of the protocol, in the order of KServe's table, then Triton's BF16.
enum class Datatype {
  boolean,
  uint8,
  uint16,
  uint32,
  uint64,
  int8,
  int16,
  int32,
  int64,
  fp16,
  fp32,
  fp64,
  bytes,
  bf16
};

// "BOOL", "UINT8", ..., "FP32", "BYTES", "BF16": the wire spelling (case-sensitive, as KServe says).
[[nodiscard]] std::string_view to_string(Datatype datatype) noexcept;
[[nodiscard]] std::optional<Datatype> datatype_from_string(std::string_view name) noexcept;

// Bytes per element; 0 for BYTES, whose elements have their own length.
[[nodiscard]] std::size_t element_size_bytes(Datatype datatype) noexcept;

struct Tensor {
  std::string name;
  Datatype datatype = Datatype::fp32;
  std::vector<std::int64_t> shape;
  // Row-major, little-endian element bytes; BYTES elements as 4-byte length prefixes + bytes.
  std::vector<std::byte> data;
};

// Product of the dimensions; nullopt when a dimension is negative or the product overflows.
[[nodiscard]] std::optional<std::uint64_t> element_count(std::span<const std::int64_t> shape) noexcept;
// "[1,3,224,224]", for messages.
[[nodiscard]] std::string shape_string(std::span<const std::int64_t> shape);

// Throws ProtocolError(http_status) unless `tensor.data` holds exactly the elements its shape
// and datatype call for (for BYTES: that many well-formed length-prefixed elements, no bytes
// left over). The encoder and the batch helpers check every tensor that came from elsewhere.
void check_tensor_data(const Tensor& tensor, int http_status);

// BYTES elements. Appending writes the 4-byte length prefix; a BYTES element is at most
// 4 GiB - 1 bytes (the prefix is 32 bits), longer is a ProtocolError(400).
void append_bytes_element(std::vector<std::byte>& data, std::string_view element);
// Views into `data`; throws ProtocolError(400) if the length prefixes do not tile it exactly.
[[nodiscard]] std::vector<std::string_view> bytes_elements(std::span<const std::byte> data);

// FP16 and BF16 bit patterns to float, for writing such tensors as JSON numbers.
[[nodiscard]] float fp16_to_float(std::uint16_t bits) noexcept;
[[nodiscard]] float bf16_to_float(std::uint16_t bits) noexcept;

// --- Batching along dimension 0 (a model with max_batch_size > 0 takes [batch, ...]) ---

// The batch size shared by `inputs`: each one's first dimension. ProtocolError(400) if the
// inputs disagree, one has rank 0, or there are none.
[[nodiscard]] std::int64_t batch_size(std::span<const Tensor> inputs);

// One tensor with the parts stacked along dimension 0 (the name and datatype of the first part).
// The parts must agree on name, datatype and every dimension after the first; a mismatch is a
// server fault, ProtocolError(500), because parsed requests were validated against one model.
[[nodiscard]] Tensor concat_batch(std::span<const Tensor* const> parts);

// What concat_batch would make, without making it: the stacked shape and its size in bytes, after
// the same checks (ProtocolError(500) on a mismatch).
struct BatchLayout {
  std::vector<std::int64_t> shape;
  std::size_t bytes = 0;
};
[[nodiscard]] BatchLayout batch_layout(std::span<const Tensor* const> parts);
// The parts' data, stacked, into `out` (exactly batch_layout(parts).bytes long, else
// ProtocolError(500)): a caller that keeps one buffer across batches copies each byte once and
// allocates nothing (the serving thread's batch of images is tens of MB).
void copy_batch(std::span<const Tensor* const> parts, std::span<std::byte> out);

// The inverse: `batched` cut along dimension 0 into pieces of `batch_sizes` rows, which must add
// up to its first dimension (else ProtocolError(500): the engine answered with another batch).
[[nodiscard]] std::vector<Tensor> split_batch(const Tensor& batched, std::span<const std::int64_t> batch_sizes);

}  // namespace gpucap::service::kserve
