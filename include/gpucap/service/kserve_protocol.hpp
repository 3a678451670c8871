#pragma once
// The KServe v2 / Open Inference Protocol over HTTP, as Triton speaks it, without HTTP: parse and
// validate an inference request body, encode the response body, and build the metadata and model
// config documents. The server (on cpp-httplib) routes, reads headers and calls these.
//
// Sources, and the rules taken from each:
// - KServe docs/predict-api/v2/required_api.md (Triton's copy: docs/protocol/README.md):
//   request {"id"?, "parameters"?, "inputs": [{"name", "shape", "datatype", "parameters"?,
//   "data"}], "outputs"?: [{"name", "parameters"?}]}; "data" is row-major, nested or flat;
//   response {"model_name", "model_version"?, "id"?, "outputs": [{"name", "shape", "datatype",
//   "data"}]}; errors are {"error": "<message>"}, 400 for a bad request.
// - Triton docs/protocol/extension_binary_data.md: an input with parameters.binary_data_size
//   carries no "data"; its bytes follow the JSON header in the body, in the order of the inputs
//   in the JSON, and Inference-Header-Content-Length gives the header's length. An output is
//   returned as binary when its parameters.binary_data is true, or, when it says nothing, when
//   the request's parameters.binary_data_output is true. The response frames binary outputs the
//   same way: JSON header (each binary output with parameters.binary_data_size), then the bytes.
//   A header length of 0 is the "raw binary request": the whole body is the one input's data.
// - Triton docs/protocol/extension_schedule_policy.md: request parameters "priority" (0 = the
//   default; 1 is the highest) and "timeout" (microseconds).
// - Triton docs/protocol/extension_model_configuration.md: GET v2/models/{m}/config returns the
//   model_config.proto message as JSON; perf_analyzer reads it (max_batch_size, input, output).
// - Triton docs/protocol/extension_classification.md (and its server's src/classification.cc for
//   what the document leaves open): an output asked for with parameters.classification = n comes
//   back as a BYTES tensor [batch, min(n, elements per item)] (or [min(n, elements)] for a model
//   that does not batch) of "value:index" strings, the n highest values of each batch item,
//   highest first; values written as C++'s std::to_string writes them ("3.300000" for a float);
//   integer and FP32/FP64 outputs only; at most 1,000,000 elements per item.
// What Triton's own server refuses is refused here too (FP16/BF16 inputs as JSON, "triton_"-prefixed
// parameters, sequences), each with a 400; so is the one extension Triton has and gpucap does not
// (shared memory), which GET /v2 does not list among its extensions.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/service/kserve_tensor.hpp"

namespace gpucap::service::kserve {

inline constexpr std::string_view kInferenceHeaderContentLength = "Inference-Header-Content-Length";
inline constexpr std::string_view kJsonContentType = "application/json";
inline constexpr std::string_view kBinaryContentType = "application/octet-stream";
// Deepest JSON nesting a request header may have; Triton's HTTP_MAX_JSON_NESTING_DEPTH.
inline constexpr int kMaxJsonDepth = 100;

// One input or output as the model declares it. A dimension of -1 is variable; for a model with
// max_batch_size > 0 the first dimension is the batch dimension and is -1, as in Triton's metadata.
struct TensorSpec {
  std::string name;
  Datatype datatype = Datatype::fp32;
  std::vector<std::int64_t> shape;
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  int max_batch_size = 0;  // 0: the model takes no batch dimension
};

// Throws gpucap::Error(invalid_data) for metadata the codec cannot serve: no inputs or outputs,
// duplicate names, a dimension below -1, or (max_batch_size > 0) a first dimension that is not -1.
// Call once when a model is loaded; the parser assumes metadata that passed.
void validate_model_metadata(const ModelMetadata& model);

// GET v2/models/{m}: {"name", "versions", "platform", "inputs": [{"name", "datatype", "shape"}],
// "outputs": [...]}.
[[nodiscard]] nlohmann::json to_json(const ModelMetadata& model);
// GET v2/models/{m}/config, in model_config.proto's JSON form: {"name", "platform",
// "max_batch_size", "input": [{"name", "data_type": "TYPE_FP32", "dims"}], "output": [...]}; dims
// exclude the batch dimension; "dynamic_batching": {} when the server batches (perf_analyzer then
// reports the model as dynamically batched).
[[nodiscard]] nlohmann::json model_config_json(const ModelMetadata& model, bool dynamic_batching);
// GET v2: {"name", "version", "extensions"}. Advertise only what the server implements:
// perf_analyzer asks for v2/models/{m}/stats when "statistics" is listed.
[[nodiscard]] nlohmann::json server_metadata_json(std::string_view name, std::string_view version,
                                                  std::span<const std::string> extensions);

struct RequestedOutput {
  std::string name;
  bool binary_data = false;  // resolved: the output's own "binary_data", else binary_data_output
  // parameters.classification: the top class_count classes of each batch item instead of the
  // tensor (classify_output); 0, as in Triton, returns the tensor itself.
  std::uint32_t class_count = 0;
};

struct InferRequest {
  std::string id;  // "" when the request has none (Triton's C++ client always sends "id": "")
  // Exactly the model's inputs, in the model's order (whatever the JSON order was), validated.
  std::vector<Tensor> inputs;
  // The outputs asked for, in the request's order; empty means all of them.
  std::vector<RequestedOutput> outputs;
  bool binary_data_output = false;          // applies to every output when `outputs` is empty
  std::optional<std::int64_t> priority;     // nullopt when absent or 0 (the default level)
  std::optional<std::uint64_t> timeout_us;  // nullopt when absent or 0 (the model's default)
  std::int64_t batch_size = 1;              // the inputs' first dimension; 1 for a non-batching model
  bool model_batches = false;               // max_batch_size > 0: every output's first dimension is the batch
};

// The value of an Inference-Header-Content-Length header: a decimal byte count, else a 400.
[[nodiscard]] std::size_t parse_header_length(std::string_view header_value);

// Parses and validates an inference request body against `model`. `header_length` is the
// Inference-Header-Content-Length header when the request had one. Every refusal is a
// ProtocolError (400, or 500 for a fault of the server's own) with a one-line message; no other
// exception escapes. Checks, beyond the JSON's shape and types:
// - framing: a header length no larger than the body; the inputs' binary_data_size values adding
//   up to exactly the bytes after the header; each a whole number of elements;
// - values: each JSON element of the input's datatype and in its range (an INT8 of 300, a BOOL
//   of 1, an FP32 of "x" are refused), nested or flat, at most kMaxJsonDepth deep; the tokens
//   NaN, Inf and Infinity (after an optional '-'), which Triton's parser reads, taken by FP32
//   and FP64 inputs;
// - the model: every declared input exactly once, no other; datatypes equal; rank and fixed
//   dimensions equal; the batch dimension in [1, max_batch_size] and equal across inputs; the
//   element count of the shape equal to the data's; requested outputs declared, each once.
[[nodiscard]] InferRequest parse_infer_request(std::string_view body, std::optional<std::size_t> header_length,
                                               const ModelMetadata& model);

// --- The classification extension ---

// Triton refuses to classify an output of more elements per batch item (a bound on the memory and
// CPU a request can ask for).
inline constexpr std::uint64_t kMaxClassificationElements = 1'000'000;
// gpucap's own bound on the classes of one output, all items together: a value's text can be 40
// times its bytes (an FP64 near its maximum is 309 digits), and the answer is built in memory.
inline constexpr std::size_t kMaxClassificationBytes = std::size_t{256} << 20;

// Whether outputs of this datatype can be classified: the integers, FP32 and FP64 (not BOOL, FP16,
// BF16 or BYTES, as in Triton).
[[nodiscard]] bool classifiable(Datatype datatype) noexcept;

// `output` as the classification extension returns it: a BYTES tensor of the same name holding,
// for each batch item (the first dimension when `batched`, else the whole tensor as one item), the
// min(class_count, elements per item) highest values as "value:index", highest first; equal values
// by index, NaN after every number. ProtocolError(400) for a datatype that is not classifiable, an
// item over kMaxClassificationElements or classes over `max_bytes`; ProtocolError(500)
// when the output's bytes do not match its shape.
[[nodiscard]] Tensor classify_output(const Tensor& output, std::uint32_t class_count, bool batched,
                                     std::size_t max_bytes = kMaxClassificationBytes);

struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<Tensor> outputs;
};

struct EncodedBody {
  std::string body;
  // Set when any output is binary: send it as Inference-Header-Content-Length.
  std::optional<std::size_t> header_length;
  std::string_view content_type;  // kJsonContentType or kBinaryContentType (static strings)
};

// The response body for `request`: the outputs it asked for (all when it named none; an output
// asked for with a class count as classify_output gives it), each as
// binary or as a flat JSON "data" array of its datatype (FP16/BF16 as numbers, BYTES as strings,
// NaN and infinities as null, which JSON lacks). JSON outputs carry no "parameters": Triton's C++
// client (perf_analyzer) takes any output "parameters" to mean binary data. Throws
// ProtocolError(500) when an output is missing or its bytes do not match its shape, and
// ProtocolError(400) when a BYTES output asked for as JSON is not UTF-8 text or an output cannot
// be classified.
[[nodiscard]] EncodedBody encode_infer_response(const InferResponse& response, const InferRequest& request);

// {"error": "<message>"}; bytes that are not UTF-8 are replaced, so this never throws on them.
[[nodiscard]] std::string error_json(std::string_view message);

// The batched inputs of several requests for one model: input k of the result stacks input k of
// every request along dimension 0 (parse_infer_request put every request's inputs in model order).
[[nodiscard]] std::vector<Tensor> concat_inputs(std::span<const InferRequest* const> requests);
// The per-request outputs of a batched run: result[r][k] is rows of output k for request r, in
// the order of `batch_sizes` (each request's batch_size).
[[nodiscard]] std::vector<std::vector<Tensor>> split_outputs(std::span<const Tensor> batched_outputs,
                                                             std::span<const std::int64_t> batch_sizes);

}  // namespace gpucap::service::kserve
