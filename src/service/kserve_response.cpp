#include "gpucap/service/kserve_protocol.hpp"

// Response encoding, metadata and model-config documents, and the batch helpers over requests;
// the request parser is kserve_protocol.cpp.

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <type_traits>

namespace gpucap::service::kserve {
namespace {

using nlohmann::json;

// --- Response encoding ---

void append_json_string(std::string& out, std::string_view text) {
  out += json(text).dump();  // escapes; throws type_error 316 on bytes that are not UTF-8
}

template <typename T>
void append_number(std::string& out, T value) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) {
      out += "null";
      return;
    }
  }
  // std::to_chars writes the shortest text that reads back as the same T (an FP32 0.1 is "0.1",
  // not 0.10000000149011612), straight into a stack buffer: no per-character appends.
  std::array<char, 32> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  out.append(buffer.data(), result.ptr);
}

template <typename T, typename Convert>
void append_elements(std::string& out, std::span<const std::byte> data, Convert convert) {
  const std::size_t count = data.size() / sizeof(T);
  for (std::size_t i = 0; i < count; ++i) {
    T element{};
    std::memcpy(&element, data.data() + i * sizeof(T), sizeof(T));
    if (i != 0) out += ',';
    convert(out, element);
  }
}

template <typename T>
void append_elements(std::string& out, std::span<const std::byte> data) {
  append_elements<T>(out, data, [](std::string& o, T v) { append_number(o, v); });
}

void append_json_data(std::string& out, const Tensor& tensor) {
  const std::span<const std::byte> data(tensor.data);
  switch (tensor.datatype) {
    case Datatype::boolean:
      return append_elements<std::uint8_t>(out, data,
                                           [](std::string& o, std::uint8_t v) { o += v != 0 ? "true" : "false"; });
    case Datatype::uint8:
      return append_elements<std::uint8_t>(out, data);
    case Datatype::uint16:
      return append_elements<std::uint16_t>(out, data);
    case Datatype::uint32:
      return append_elements<std::uint32_t>(out, data);
    case Datatype::uint64:
      return append_elements<std::uint64_t>(out, data);
    case Datatype::int8:
      return append_elements<std::int8_t>(out, data);
    case Datatype::int16:
      return append_elements<std::int16_t>(out, data);
    case Datatype::int32:
      return append_elements<std::int32_t>(out, data);
    case Datatype::int64:
      return append_elements<std::int64_t>(out, data);
    case Datatype::fp32:
      return append_elements<float>(out, data);
    case Datatype::fp64:
      return append_elements<double>(out, data);
    case Datatype::fp16:
      return append_elements<std::uint16_t>(
          out, data, [](std::string& o, std::uint16_t v) { append_number(o, fp16_to_float(v)); });
    case Datatype::bf16:
      return append_elements<std::uint16_t>(
          out, data, [](std::string& o, std::uint16_t v) { append_number(o, bf16_to_float(v)); });
    case Datatype::bytes: {
      bool first = true;
      for (const auto element : bytes_elements(data)) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, element);
      }
      return;
    }
  }
}

json tensor_spec_json(const TensorSpec& spec) {
  return {{"name", spec.name}, {"datatype", std::string(to_string(spec.datatype))}, {"shape", spec.shape}};
}

// model_config.proto's DataType names: TYPE_ + the protocol name, except BYTES, which is STRING.
std::string config_data_type(Datatype datatype) {
  return datatype == Datatype::bytes ? "TYPE_STRING" : fmt::format("TYPE_{}", to_string(datatype));
}

json config_tensors_json(const std::vector<TensorSpec>& specs, bool batching) {
  json tensors = json::array();
  for (const auto& spec : specs) {
    const auto dims = batching ? std::vector<std::int64_t>(spec.shape.begin() + 1, spec.shape.end()) : spec.shape;
    tensors.push_back({{"name", spec.name}, {"data_type", config_data_type(spec.datatype)}, {"dims", dims}});
  }
  return tensors;
}

}  // namespace

void validate_model_metadata(const ModelMetadata& model) {
  const auto fail = [&](const std::string& message) {
    throw Error(ErrorCode::invalid_data, fmt::format("model '{}': {}", model.name, message));
  };
  if (model.name.empty()) fail("the model needs a name");
  if (model.inputs.empty() || model.outputs.empty()) fail("a model needs at least one input and one output");
  if (model.max_batch_size < 0) fail("max_batch_size must be 0 (no batching) or more");
  for (const auto* specs : {&model.inputs, &model.outputs}) {
    for (std::size_t i = 0; i < specs->size(); ++i) {
      const auto& spec = (*specs)[i];
      if (spec.name.empty()) fail("a tensor needs a name");
      for (std::size_t j = 0; j < i; ++j) {
        if ((*specs)[j].name == spec.name) fail(fmt::format("tensor '{}' is declared twice", spec.name));
      }
      for (const auto dim : spec.shape) {
        if (dim < -1)
          fail(fmt::format("tensor '{}' has dimension {}; dimensions are -1 (variable) or more", spec.name, dim));
      }
      if (model.max_batch_size > 0 && (spec.shape.empty() || spec.shape.front() != -1)) {
        fail(fmt::format("tensor '{}' has shape {}; with max_batch_size > 0 the first (batch) dimension must be -1",
                         spec.name, shape_string(spec.shape)));
      }
    }
  }
}

json to_json(const ModelMetadata& model) {
  json inputs = json::array();
  for (const auto& spec : model.inputs) inputs.push_back(tensor_spec_json(spec));
  json outputs = json::array();
  for (const auto& spec : model.outputs) outputs.push_back(tensor_spec_json(spec));
  return {{"name", model.name},
          {"versions", model.versions},
          {"platform", model.platform},
          {"inputs", std::move(inputs)},
          {"outputs", std::move(outputs)}};
}

json model_config_json(const ModelMetadata& model, bool dynamic_batching) {
  const bool batching = model.max_batch_size > 0;
  json config = {{"name", model.name},
                 {"platform", model.platform},
                 {"max_batch_size", model.max_batch_size},
                 {"input", config_tensors_json(model.inputs, batching)},
                 {"output", config_tensors_json(model.outputs, batching)}};
  if (dynamic_batching) config["dynamic_batching"] = json::object();
  return config;
}

json server_metadata_json(std::string_view name, std::string_view version, std::span<const std::string> extensions) {
  return {{"name", std::string(name)},
          {"version", std::string(version)},
          {"extensions", std::vector<std::string>(extensions.begin(), extensions.end())}};
}

EncodedBody encode_infer_response(const InferResponse& response, const InferRequest& request) {
  struct Planned {
    const Tensor* tensor;
    bool binary;
  };
  std::vector<Planned> plan;
  std::vector<Tensor> classified;  // outputs asked for as classes; reserved, so the plan's pointers stay valid
  if (request.outputs.empty()) {
    for (const auto& output : response.outputs) plan.push_back({&output, request.binary_data_output});
  } else {
    classified.reserve(request.outputs.size());
    for (const auto& wanted : request.outputs) {
      const Tensor* found = nullptr;
      for (const auto& output : response.outputs) {
        if (output.name == wanted.name) found = &output;
      }
      if (found == nullptr) {
        throw ProtocolError(kInternalError,
                            fmt::format("model '{}' produced no output '{}'", response.model_name, wanted.name));
      }
      if (wanted.class_count > 0) {
        classified.push_back(classify_output(*found, wanted.class_count, request.model_batches));
        found = &classified.back();
      }
      plan.push_back({found, wanted.binary_data});
    }
  }

  std::size_t binary_bytes = 0;
  bool any_binary = false;
  for (const auto& planned : plan) {
    check_tensor_data(*planned.tensor, kInternalError);
    if (planned.binary) {
      any_binary = true;
      binary_bytes += planned.tensor->data.size();
    }
  }

  // One allocation for the header in the common case: JSON numbers take up to ~24 characters (6
  // per byte of an FP32), a BYTES element as JSON about its bytes (quotes and comma for its 4-byte
  // length).
  std::size_t header_estimate = 128;
  for (const auto& planned : plan) {
    const auto bytes = planned.tensor->data.size();
    header_estimate += 96 + (planned.binary ? 0 : (planned.tensor->datatype == Datatype::bytes ? bytes : bytes * 6));
  }
  std::string out;
  out.reserve(header_estimate);
  out += "{\"model_name\":";
  append_json_string(out, response.model_name);
  if (!response.model_version.empty()) {
    out += ",\"model_version\":";
    append_json_string(out, response.model_version);
  }
  if (!response.id.empty()) {
    out += ",\"id\":";
    append_json_string(out, response.id);
  }
  out += ",\"outputs\":[";
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const Tensor& tensor = *plan[i].tensor;
    if (i != 0) out += ',';
    out += "{\"name\":";
    append_json_string(out, tensor.name);
    fmt::format_to(std::back_inserter(out), ",\"datatype\":\"{}\",\"shape\":{}", to_string(tensor.datatype),
                   shape_string(tensor.shape));
    if (plan[i].binary) {
      fmt::format_to(std::back_inserter(out), ",\"parameters\":{{\"binary_data_size\":{}}}}}", tensor.data.size());
      continue;
    }
    out += ",\"data\":[";
    try {
      append_json_data(out, tensor);
    } catch (const json::exception&) {
      throw ProtocolError(kBadRequest, fmt::format("output '{}' holds bytes that are not UTF-8 text, which JSON cannot "
                                                   "carry; ask for it with parameters.binary_data true",
                                                   tensor.name));
    }
    out += "]}";
  }
  out += "]}";

  EncodedBody encoded;
  if (!any_binary) {
    encoded.body = std::move(out);
    encoded.content_type = kJsonContentType;
    return encoded;
  }
  encoded.header_length = out.size();
  out.reserve(out.size() + binary_bytes);
  for (const auto& planned : plan) {
    if (!planned.binary) continue;
    const auto& data = planned.tensor->data;
    out.append(reinterpret_cast<const char*>(data.data()), data.size());
  }
  encoded.body = std::move(out);
  encoded.content_type = kBinaryContentType;
  return encoded;
}

std::string error_json(std::string_view message) {
  return json{{"error", std::string(message)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<Tensor> concat_inputs(std::span<const InferRequest* const> requests) {
  if (requests.empty()) throw ProtocolError(kInternalError, "no requests to batch");
  const std::size_t input_count = requests.front()->inputs.size();
  for (const auto* request : requests) {
    if (request->inputs.size() != input_count) {
      throw ProtocolError(kInternalError, "requests with different inputs cannot share a batch");
    }
  }
  std::vector<Tensor> batched;
  batched.reserve(input_count);
  std::vector<const Tensor*> parts(requests.size());
  for (std::size_t k = 0; k < input_count; ++k) {
    for (std::size_t r = 0; r < requests.size(); ++r) parts[r] = &requests[r]->inputs[k];
    batched.push_back(concat_batch(parts));
  }
  return batched;
}

std::vector<std::vector<Tensor>> split_outputs(std::span<const Tensor> batched_outputs,
                                               std::span<const std::int64_t> batch_sizes) {
  std::vector<std::vector<Tensor>> per_request(batch_sizes.size());
  for (auto& outputs : per_request) outputs.reserve(batched_outputs.size());
  for (const auto& batched : batched_outputs) {
    auto pieces = split_batch(batched, batch_sizes);
    for (std::size_t r = 0; r < pieces.size(); ++r) per_request[r].push_back(std::move(pieces[r]));
  }
  return per_request;
}

}  // namespace gpucap::service::kserve
