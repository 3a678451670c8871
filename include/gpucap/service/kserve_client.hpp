#pragma once
// The client side of KServe v2 / the Open Inference Protocol over HTTP, for `gpucap load`: the
// server's URL, the model's metadata as any KServe v2 server describes it (Triton, KServe's
// runtimes, gpucap serve), and one inference request built from that metadata with seeded
// random data, encoded once so that a load run sends the same bytes every time.
//
// The request is framed as Triton's own clients frame it (client/src/c++/library/http_client.cc):
// - JSON: {"inputs": [{"name", "shape", "datatype", "data": [...]}]}, data flat and row-major,
//   Content-Type application/json; the server answers with JSON outputs.
// - binary (Triton's binary tensor data extension): a JSON header {"id": "", "parameters":
//   {"binary_data_output": true}, "inputs": [{"name", "datatype", "shape", "parameters":
//   {"binary_data_size": N}}]}, then each input's bytes in the same order, Content-Type
//   application/octet-stream and Inference-Header-Content-Length: the header's length in bytes.
//   FP16 and BF16 inputs can only be sent this way (Triton refuses them as JSON numbers).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/core/server_url.hpp"
#include "gpucap/service/kserve_protocol.hpp"
#include "gpucap/service/kserve_tensor.hpp"

namespace gpucap::service::kserve {

using gpucap::parse_server_url;
using gpucap::ServerUrl;

// PREFIX/v2/models/{model}[/versions/{version}] (version "" is the server's choice).
[[nodiscard]] std::string model_path(const ServerUrl& url, std::string_view model, std::string_view version);

// The body of GET v2/models/{m}: {"name", "versions"?, "platform"?, "inputs": [{"name",
// "datatype", "shape"}], "outputs"?: [...]}. The metadata says nothing of max_batch_size, which
// is left 0; a leading -1 in an input's shape is the batch dimension (Triton's convention).
// Error(invalid_data) "model metadata from SOURCE: ..." for anything else.
[[nodiscard]] ModelMetadata parse_model_metadata(std::string_view body, std::string_view source);

// GET the model's metadata. Error(io) when the server cannot be reached or answers 5xx;
// Error(usage) when it does not know the model (404, or Triton's 400 for an unknown model);
// Error(invalid_data) when the answer is not metadata.
[[nodiscard]] ModelMetadata fetch_model_metadata(const ServerUrl& url, std::string_view model,
                                                 std::string_view version, double timeout_s);

// --shape NAME:D1,D2,...: an input's dimensions after the batch dimension (all of them for an
// input without one), for inputs whose metadata leaves a dimension variable (-1), as
// perf_analyzer's --shape. Error(usage) otherwise.
struct InputShape {
  std::string name;
  std::vector<std::int64_t> dims;
};
[[nodiscard]] InputShape parse_input_shape(std::string_view text);

// One tensor per model input, in the model's order: the shape from the metadata with a leading
// -1 replaced by `batch` and the rest from `shapes` where given; data drawn from a generator
// seeded with `seed` (floats in [0, 1), integers in [0, 100), BOOL 0/1, BYTES 8 letters).
// Error(usage) for a batch above 1 on a model without a batch dimension, a variable dimension
// without --shape, a --shape for no input or of the wrong rank, or an input over 1 GiB.
[[nodiscard]] std::vector<Tensor> make_request_inputs(const ModelMetadata& model, std::int64_t batch,
                                                      std::span<const InputShape> shapes, std::uint64_t seed);

struct InferRequestBody {
  std::string body;
  std::string content_type;                  // application/json or application/octet-stream
  std::optional<std::size_t> header_length;  // Inference-Header-Content-Length, when binary
};

// The request body for `inputs` (see the framing above). Error(usage) for an FP16 or BF16 input
// as JSON.
[[nodiscard]] InferRequestBody encode_infer_request(std::span<const Tensor> inputs, bool binary);

// The message of an error answer: the text of {"error": "..."}, else the body's first line
// (at most 200 characters), else "HTTP <status>".
[[nodiscard]] std::string error_message_of(std::string_view body, int http_status);

// "INPUT0 FP32 [1,16], INPUT1 INT32 [1,16]", for reports.
[[nodiscard]] std::string describe_inputs(std::span<const Tensor> inputs);

}  // namespace gpucap::service::kserve
