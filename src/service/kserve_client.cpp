#include "gpucap/service/kserve_client.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <type_traits>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::service::kserve {
namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxInputBytes = std::uint64_t{1} << 30;
constexpr std::size_t kMaxMessageChars = 200;

Error metadata_error(std::string_view source, const std::string& message) {
  return Error(ErrorCode::invalid_data, fmt::format("model metadata from {}: {}", source, message));
}

std::vector<TensorSpec> parse_tensor_specs(const json& doc, const char* key, std::string_view source, bool required) {
  std::vector<TensorSpec> specs;
  const auto found = doc.find(key);
  if (found == doc.end()) {
    if (required) throw metadata_error(source, fmt::format("no \"{}\"", key));
    return specs;
  }
  if (!found->is_array()) throw metadata_error(source, fmt::format("\"{}\" is not an array", key));
  for (const auto& item : *found) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string() || !item.contains("datatype") ||
        !item["datatype"].is_string() || !item.contains("shape") || !item["shape"].is_array()) {
      throw metadata_error(source, fmt::format("an entry of \"{}\" is not {{\"name\", \"datatype\", \"shape\"}}", key));
    }
    TensorSpec spec;
    spec.name = item["name"].get<std::string>();
    const auto datatype_name = item["datatype"].get<std::string>();
    const auto datatype = datatype_from_string(datatype_name);
    if (!datatype) {
      throw metadata_error(source, fmt::format("tensor '{}' has an unknown datatype '{}'", spec.name, datatype_name));
    }
    spec.datatype = *datatype;
    for (const auto& dim : item["shape"]) {
      if (!dim.is_number_integer() || dim.get<std::int64_t>() < -1) {
        throw metadata_error(source, fmt::format("tensor '{}' has a dimension that is not an integer >= -1: {}",
                                                 spec.name, dim.dump()));
      }
      spec.shape.push_back(dim.get<std::int64_t>());
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

// --- Seeded data ---

double uniform(std::mt19937_64& engine) { return static_cast<double>(engine() >> 11) * 0x1.0p-53; }

template <typename T>
void append_value(std::vector<std::byte>& data, T value) {
  const auto offset = data.size();
  data.resize(offset + sizeof(T));
  std::memcpy(data.data() + offset, &value, sizeof(T));
}

void fill_random(Tensor& tensor, std::uint64_t count, std::mt19937_64& engine) {
  auto& data = tensor.data;
  const auto small_integer = [&engine] { return engine() % 100; };
  for (std::uint64_t i = 0; i < count; ++i) {
    switch (tensor.datatype) {
      case Datatype::boolean: append_value(data, static_cast<std::uint8_t>(engine() & 1U)); break;
      case Datatype::uint8: append_value(data, static_cast<std::uint8_t>(small_integer())); break;
      case Datatype::uint16: append_value(data, static_cast<std::uint16_t>(small_integer())); break;
      case Datatype::uint32: append_value(data, static_cast<std::uint32_t>(small_integer())); break;
      case Datatype::uint64: append_value(data, static_cast<std::uint64_t>(small_integer())); break;
      case Datatype::int8: append_value(data, static_cast<std::int8_t>(small_integer())); break;
      case Datatype::int16: append_value(data, static_cast<std::int16_t>(small_integer())); break;
      case Datatype::int32: append_value(data, static_cast<std::int32_t>(small_integer())); break;
      case Datatype::int64: append_value(data, static_cast<std::int64_t>(small_integer())); break;
      case Datatype::fp32: append_value(data, static_cast<float>(uniform(engine))); break;
      case Datatype::fp64: append_value(data, uniform(engine)); break;
      // Half floats in [0.5, 1): exponent of 0.5, random mantissa bits.
      case Datatype::fp16: append_value(data, static_cast<std::uint16_t>(0x3800U | (engine() & 0x3FFU))); break;
      case Datatype::bf16: append_value(data, static_cast<std::uint16_t>(0x3F00U | (engine() & 0x7FU))); break;
      case Datatype::bytes: {
        std::array<char, 8> letters{};
        for (auto& c : letters) c = static_cast<char>('a' + engine() % 26);
        append_bytes_element(data, std::string_view(letters.data(), letters.size()));
        break;
      }
    }
  }
}

// --- JSON encoding ---

template <typename T>
void append_number(std::string& out, T value) {
  std::array<char, 32> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  out.append(buffer.data(), result.ptr);
}

template <typename T>
void append_elements(std::string& out, const std::vector<std::byte>& data) {
  const std::size_t count = data.size() / sizeof(T);
  for (std::size_t i = 0; i < count; ++i) {
    T value{};
    std::memcpy(&value, data.data() + i * sizeof(T), sizeof(T));
    if (i != 0) out += ',';
    if constexpr (std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>) {
      append_number(out, static_cast<int>(value));
    } else {
      append_number(out, value);
    }
  }
}

void append_json_data(std::string& out, const Tensor& tensor) {
  switch (tensor.datatype) {
    case Datatype::boolean:
      for (std::size_t i = 0; i < tensor.data.size(); ++i) {
        if (i != 0) out += ',';
        out += tensor.data[i] != std::byte{0} ? "true" : "false";
      }
      return;
    case Datatype::uint8: return append_elements<std::uint8_t>(out, tensor.data);
    case Datatype::uint16: return append_elements<std::uint16_t>(out, tensor.data);
    case Datatype::uint32: return append_elements<std::uint32_t>(out, tensor.data);
    case Datatype::uint64: return append_elements<std::uint64_t>(out, tensor.data);
    case Datatype::int8: return append_elements<std::int8_t>(out, tensor.data);
    case Datatype::int16: return append_elements<std::int16_t>(out, tensor.data);
    case Datatype::int32: return append_elements<std::int32_t>(out, tensor.data);
    case Datatype::int64: return append_elements<std::int64_t>(out, tensor.data);
    case Datatype::fp32: return append_elements<float>(out, tensor.data);
    case Datatype::fp64: return append_elements<double>(out, tensor.data);
    case Datatype::bytes: {
      bool first = true;
      for (const auto element : bytes_elements(tensor.data)) {
        if (!first) out += ',';
        first = false;
        out += json(std::string(element)).dump(-1, ' ', false, json::error_handler_t::replace);
      }
      return;
    }
    case Datatype::fp16:
    case Datatype::bf16:
      break;
  }
  throw usage_error(fmt::format("input '{}' is {}, which KServe servers take only as binary data: add --binary",
                                tensor.name, to_string(tensor.datatype)));
}

}  // namespace

std::string model_path(const ServerUrl& url, std::string_view model, std::string_view version) {
  auto path = fmt::format("{}/v2/models/{}", url.path_prefix, model);
  if (!version.empty()) path += fmt::format("/versions/{}", version);
  return path;
}

ModelMetadata parse_model_metadata(std::string_view body, std::string_view source) {
  const auto doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw metadata_error(source, fmt::format("not a JSON object: {}", trim(body.substr(0, 120))));
  }
  ModelMetadata model;
  if (const auto name = doc.find("name"); name != doc.end() && name->is_string()) model.name = name->get<std::string>();
  if (const auto platform = doc.find("platform"); platform != doc.end() && platform->is_string()) {
    model.platform = platform->get<std::string>();
  }
  if (const auto versions = doc.find("versions"); versions != doc.end() && versions->is_array()) {
    for (const auto& v : *versions) {
      if (v.is_string()) model.versions.push_back(v.get<std::string>());
    }
  }
  model.inputs = parse_tensor_specs(doc, "inputs", source, /*required=*/true);
  model.outputs = parse_tensor_specs(doc, "outputs", source, /*required=*/false);
  if (model.inputs.empty()) throw metadata_error(source, "the model declares no inputs");
  return model;
}

ModelMetadata fetch_model_metadata(const ServerUrl& url, std::string_view model, std::string_view version,
                                   double timeout_s) {
  httplib::Client client(url.scheme_host_port);
  const auto whole = static_cast<time_t>(std::floor(timeout_s));
  const auto micro = static_cast<time_t>((timeout_s - static_cast<double>(whole)) * 1e6);
  client.set_connection_timeout(whole, micro);
  client.set_read_timeout(whole, micro);
  client.set_write_timeout(whole, micro);
  const auto path = model_path(url, model, version);
  const auto result = client.Get(path, httplib::Headers{{"Accept-Encoding", "identity"}});
  if (!result) {
    throw Error(ErrorCode::io, fmt::format("cannot reach the KServe server at {} (GET {}: {} error)", url.text, path,
                                           httplib::to_string(result.error())));
  }
  const int status = result->status;
  if (status == 200) return parse_model_metadata(result->body, url.scheme_host_port + path);
  const auto message = error_message_of(result->body, status);
  const auto named = version.empty() ? fmt::format("model '{}'", model)
                                     : fmt::format("model '{}' version '{}'", model, version);
  if (status == 404 || status == 400) {
    throw usage_error(fmt::format("the server at {} does not know {} (GET {} answered {}: {})", url.text, named, path,
                                  status, message));
  }
  throw Error(status >= 500 ? ErrorCode::io : ErrorCode::usage,
              fmt::format("the server at {} answered GET {} with {}: {}", url.text, path, status, message));
}

InputShape parse_input_shape(std::string_view text) {
  const auto colon = text.rfind(':');
  const auto bad = [&] {
    return usage_error(fmt::format("--shape '{}' is not NAME:D1,D2,... with positive whole dimensions", text));
  };
  if (colon == std::string_view::npos || colon == 0) throw bad();
  InputShape shape;
  shape.name = std::string(trim(text.substr(0, colon)));
  for (const auto part : split(text.substr(colon + 1), ',')) {
    const auto dim = parse_integer(part);
    if (!dim || *dim < 1) throw bad();
    shape.dims.push_back(*dim);
  }
  if (shape.name.empty()) throw bad();
  return shape;
}

std::vector<Tensor> make_request_inputs(const ModelMetadata& model, std::int64_t batch,
                                        std::span<const InputShape> shapes, std::uint64_t seed) {
  if (batch < 1) throw usage_error(fmt::format("--batch must be at least 1, got {}", batch));
  for (const auto& shape : shapes) {
    bool found = false;
    for (const auto& spec : model.inputs) found = found || spec.name == shape.name;
    if (!found) {
      std::vector<std::string> names;
      for (const auto& spec : model.inputs) names.push_back(spec.name);
      throw usage_error(fmt::format("--shape names '{}', which is not an input of model '{}' (inputs: {})",
                                    shape.name, model.name, join(names, ", ")));
    }
  }
  std::mt19937_64 engine(seed);
  std::vector<Tensor> tensors;
  for (const auto& spec : model.inputs) {
    const bool batched = !spec.shape.empty() && spec.shape.front() == -1;
    if (!batched && batch > 1) {
      throw usage_error(fmt::format("--batch {}: input '{}' has shape {}, without a batch dimension (-1 first)",
                                    batch, spec.name, shape_string(spec.shape)));
    }
    Tensor tensor;
    tensor.name = spec.name;
    tensor.datatype = spec.datatype;
    std::vector<std::int64_t> rest(spec.shape.begin() + (batched ? 1 : 0), spec.shape.end());
    const InputShape* given = nullptr;
    for (const auto& shape : shapes) {
      if (shape.name == spec.name) given = &shape;
    }
    if (given != nullptr) {
      if (given->dims.size() != rest.size()) {
        throw usage_error(fmt::format("--shape {}: {} dimensions given, the input has {} (shape {}{})", spec.name,
                                      given->dims.size(), rest.size(), shape_string(spec.shape),
                                      batched ? ", batch dimension excluded" : ""));
      }
      for (std::size_t d = 0; d < rest.size(); ++d) {
        if (rest[d] != -1 && rest[d] != given->dims[d]) {
          throw usage_error(fmt::format("--shape {}: dimension {} is fixed at {} by the model, not {}", spec.name,
                                        d + 1, rest[d], given->dims[d]));
        }
        rest[d] = given->dims[d];
      }
    }
    for (const auto dim : rest) {
      if (dim == -1) {
        throw usage_error(fmt::format("input '{}' has a variable dimension (shape {}): give its dimensions with "
                                      "--shape {}:D1,D2,...",
                                      spec.name, shape_string(spec.shape), spec.name));
      }
    }
    if (batched) tensor.shape.push_back(batch);
    tensor.shape.insert(tensor.shape.end(), rest.begin(), rest.end());
    const auto count = element_count(tensor.shape);
    const auto element_bytes = spec.datatype == Datatype::bytes ? 12 : element_size_bytes(spec.datatype);
    if (!count || *count > kMaxInputBytes / element_bytes) {
      throw usage_error(fmt::format("input '{}' of shape {} would be larger than 1 GiB", spec.name,
                                    shape_string(tensor.shape)));
    }
    tensor.data.reserve(static_cast<std::size_t>(*count * element_bytes));
    fill_random(tensor, *count, engine);
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

InferRequestBody encode_infer_request(std::span<const Tensor> inputs, bool binary) {
  InferRequestBody request;
  if (!binary) {
    std::size_t estimate = 64;
    for (const auto& tensor : inputs) estimate += 96 + tensor.data.size() * 4;
    request.body.reserve(estimate);
    request.body += "{\"inputs\":[";
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto& tensor = inputs[i];
      if (i != 0) request.body += ',';
      request.body += fmt::format("{{\"name\":{},\"shape\":{},\"datatype\":\"{}\",\"data\":[", json(tensor.name).dump(),
                                  shape_string(tensor.shape), to_string(tensor.datatype));
      append_json_data(request.body, tensor);
      request.body += "]}";
    }
    request.body += "]}";
    request.content_type = std::string(kJsonContentType);
    return request;
  }
  nlohmann::ordered_json header;
  header["id"] = "";
  header["parameters"] = {{"binary_data_output", true}};
  header["inputs"] = nlohmann::ordered_json::array();
  std::size_t data_bytes = 0;
  for (const auto& tensor : inputs) {
    nlohmann::ordered_json input;
    input["name"] = tensor.name;
    input["datatype"] = std::string(to_string(tensor.datatype));
    input["shape"] = tensor.shape;
    input["parameters"] = {{"binary_data_size", tensor.data.size()}};
    header["inputs"].push_back(std::move(input));
    data_bytes += tensor.data.size();
  }
  request.body = header.dump();
  request.header_length = request.body.size();
  request.body.reserve(request.body.size() + data_bytes);
  for (const auto& tensor : inputs) {
    request.body.append(reinterpret_cast<const char*>(tensor.data.data()), tensor.data.size());
  }
  request.content_type = std::string(kBinaryContentType);
  return request;
}

namespace {

// The first line of `text`, trimmed and cut to kMaxMessageChars; "HTTP <status>" when that is
// empty (an answer {"error": ""} says nothing: a fuzz finding, kserve_client).
std::string one_line_or_status(std::string_view text, int http_status) {
  auto line = trim(text.substr(0, text.find('\n')));
  if (line.empty()) return fmt::format("HTTP {}", http_status);
  if (line.size() > kMaxMessageChars) line = line.substr(0, kMaxMessageChars);
  return std::string(line);
}

}  // namespace

std::string error_message_of(std::string_view body, int http_status) {
  const auto doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object()) {
    const auto error = doc.find("error");
    if (error != doc.end()) {
      return one_line_or_status(error->is_string() ? error->get<std::string>() : error->dump(), http_status);
    }
  }
  return one_line_or_status(body, http_status);
}

std::string describe_inputs(std::span<const Tensor> inputs) {
  std::vector<std::string> parts;
  for (const auto& tensor : inputs) {
    parts.push_back(fmt::format("{} {} {}", tensor.name, to_string(tensor.datatype), shape_string(tensor.shape)));
  }
  return join(parts, ", ");
}

}  // namespace gpucap::service::kserve
