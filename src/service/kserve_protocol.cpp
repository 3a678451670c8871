#include "gpucap/service/kserve_protocol.hpp"

#include "kserve_json_guard.hpp"
#include "kserve_tensor_fill.hpp"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <new>
#include <utility>

namespace gpucap::service::kserve {
namespace {

using nlohmann::json;

ProtocolError bad_request(const std::string& message) { return ProtocolError(kBadRequest, message); }

using detail::excerpt;
using detail::fill_from_binary;
using detail::fill_from_json;

const json* member(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const std::string& string_member(const json& object, const char* key, std::string_view where) {
  const json* value = member(object, key);
  if (value == nullptr) throw bad_request(fmt::format("{} has no '{}'", where, key));
  if (!value->is_string()) {
    throw bad_request(fmt::format("'{}' of {} must be a string, not {}", key, where, excerpt(*value)));
  }
  return value->get_ref<const std::string&>();
}

const json* optional_object(const json& object, const char* key, std::string_view where) {
  const json* value = member(object, key);
  if (value != nullptr && !value->is_object()) {
    throw bad_request(fmt::format("'{}' of {} must be a JSON object, not {}", key, where, excerpt(*value)));
  }
  return value;
}

std::optional<std::uint64_t> as_unsigned(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  return std::nullopt;
}

bool as_bool(const json& value, std::string_view what) {
  if (!value.is_boolean()) throw bad_request(fmt::format("{} must be true or false, not {}", what, excerpt(value)));
  return value.get<bool>();
}

// --- Validation against the model ---

std::vector<std::int64_t> parse_shape(const json& value, const std::string& input_name) {
  if (!value.is_array()) throw bad_request(fmt::format("'shape' of input '{}' must be an array", input_name));
  std::vector<std::int64_t> shape;
  shape.reserve(value.size());
  for (const auto& dim : value) {
    const auto d = as_unsigned(dim);
    if (!d || !std::in_range<std::int64_t>(*d)) {
      throw bad_request(
          fmt::format("'shape' of input '{}' must hold non-negative integers, not {}", input_name, excerpt(dim)));
    }
    shape.push_back(static_cast<std::int64_t>(*d));
  }
  return shape;
}

void check_shape(const TensorSpec& spec, std::span<const std::int64_t> shape, const ModelMetadata& model) {
  if (shape.size() != spec.shape.size()) {
    throw bad_request(fmt::format("input '{}' has shape {} (rank {}); model '{}' expects rank {} ({})", spec.name,
                                  shape_string(shape), shape.size(), model.name, spec.shape.size(),
                                  shape_string(spec.shape)));
  }
  std::size_t first_fixed = 0;
  if (model.max_batch_size > 0) {
    if (shape[0] < 1 || shape[0] > model.max_batch_size) {
      throw bad_request(fmt::format("input '{}' has batch size {}; model '{}' takes 1 to {}", spec.name, shape[0],
                                    model.name, model.max_batch_size));
    }
    first_fixed = 1;
  }
  for (std::size_t i = first_fixed; i < shape.size(); ++i) {
    if (spec.shape[i] != -1 && spec.shape[i] != shape[i]) {
      throw bad_request(fmt::format("input '{}' has shape {}; model '{}' expects {} (dimension {} must be {})",
                                    spec.name, shape_string(shape), model.name, shape_string(spec.shape), i,
                                    spec.shape[i]));
    }
  }
}

std::optional<std::size_t> find_spec(const std::vector<TensorSpec>& specs, std::string_view name) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return i;
  }
  return std::nullopt;
}

std::string spec_names(const std::vector<TensorSpec>& specs) {
  std::string names;
  for (const auto& spec : specs) names += (names.empty() ? "" : ", ") + spec.name;
  return names;
}

// --- Request parts ---

void parse_request_parameters(const json& doc, InferRequest& request) {
  const json* parameters = optional_object(doc, "parameters", "the request");
  if (parameters == nullptr) return;
  for (const auto& [key, value] : parameters->items()) {
    if (key == "priority") {
      const auto p = as_unsigned(value);
      if (!p || !std::in_range<std::int64_t>(*p)) {
        throw bad_request(fmt::format("parameters.priority must be a non-negative integer, not {}", excerpt(value)));
      }
      if (*p != 0) request.priority = static_cast<std::int64_t>(*p);
    } else if (key == "timeout") {
      const auto t = as_unsigned(value);
      if (!t) {
        throw bad_request(
            fmt::format("parameters.timeout must be a non-negative integer of microseconds, not {}", excerpt(value)));
      }
      if (*t != 0) request.timeout_us = *t;
    } else if (key == "binary_data_output") {
      request.binary_data_output = as_bool(value, "parameters.binary_data_output");
    } else if (key == "sequence_id") {
      const bool unset = (value.is_number_unsigned() && value.get<std::uint64_t>() == 0) ||
                         (value.is_number_integer() && value.get<std::int64_t>() == 0) ||
                         (value.is_string() && value.get_ref<const std::string&>().empty());
      if (!unset) throw bad_request("sequences (parameters.sequence_id) are not supported by this server");
    } else if (key == "sequence_start" || key == "sequence_end") {
      if (as_bool(value, "parameters." + key)) {
        throw bad_request(fmt::format("sequences (parameters.{}) are not supported by this server", key));
      }
    } else if (key.starts_with("triton_")) {
      throw bad_request(fmt::format("parameter '{}': keys starting with 'triton_' are reserved", key));
    }
    // Anything else is a custom parameter, which no gpucap engine takes: ignored, as KServe allows.
  }
}

// parameters.classification of a requested output: a count of classes, 0 for none (as Triton).
std::uint32_t parse_class_count(const json& value, const TensorSpec& output) {
  const auto count = as_unsigned(value);
  if (!count || !std::in_range<std::uint32_t>(*count)) {
    throw bad_request(fmt::format("parameters.classification of output '{}' must be a count of classes from 0 to {}, "
                                  "not {}",
                                  output.name, std::numeric_limits<std::uint32_t>::max(), excerpt(value)));
  }
  if (*count != 0 && !classifiable(output.datatype)) {
    throw bad_request(fmt::format("class result not available for output '{}' due to unsupported type '{}'",
                                  output.name, to_string(output.datatype)));
  }
  return static_cast<std::uint32_t>(*count);
}

void parse_requested_outputs(const json& doc, const ModelMetadata& model, InferRequest& request) {
  const json* outputs = member(doc, "outputs");
  if (outputs == nullptr) return;
  if (!outputs->is_array()) throw bad_request("'outputs' must be an array");
  for (std::size_t i = 0; i < outputs->size(); ++i) {
    const json& output = (*outputs)[i];
    const auto where = fmt::format("outputs[{}]", i);
    if (!output.is_object()) throw bad_request(fmt::format("{} must be a JSON object", where));
    const auto& name = string_member(output, "name", where);
    const auto spec_index = find_spec(model.outputs, name);
    if (!spec_index) {
      throw bad_request(fmt::format("unknown output '{}' for model '{}' (its outputs: {})", name, model.name,
                                    spec_names(model.outputs)));
    }
    for (const auto& earlier : request.outputs) {
      if (earlier.name == name) throw bad_request(fmt::format("output '{}' is requested twice", name));
    }
    RequestedOutput requested{name, request.binary_data_output};
    if (const json* parameters = optional_object(output, "parameters", where)) {
      if (parameters->contains("shared_memory_region")) {
        throw bad_request(fmt::format("output '{}': the shared-memory extension is not supported", name));
      }
      if (const json* classification = member(*parameters, "classification")) {
        requested.class_count = parse_class_count(*classification, model.outputs[*spec_index]);
      }
      if (const json* binary = member(*parameters, "binary_data")) {
        requested.binary_data = as_bool(*binary, fmt::format("parameters.binary_data of output '{}'", name));
      }
    }
    request.outputs.push_back(std::move(requested));
  }
}

void parse_inputs(const json& doc, std::string_view binary, bool header_length_given, const ModelMetadata& model,
                  InferRequest& request) {
  const json* inputs = member(doc, "inputs");
  if (inputs == nullptr) throw bad_request("the request has no 'inputs'");
  if (!inputs->is_array()) throw bad_request("'inputs' must be an array");

  std::vector<std::optional<Tensor>> by_spec(model.inputs.size());
  std::size_t binary_used = 0;
  for (std::size_t i = 0; i < inputs->size(); ++i) {
    const json& input = (*inputs)[i];
    const auto where = fmt::format("inputs[{}]", i);
    if (!input.is_object()) throw bad_request(fmt::format("{} must be a JSON object", where));
    const auto& name = string_member(input, "name", where);
    const auto spec_index = find_spec(model.inputs, name);
    if (!spec_index) {
      throw bad_request(fmt::format("unknown input '{}' for model '{}' (its inputs: {})", name, model.name,
                                    spec_names(model.inputs)));
    }
    if (by_spec[*spec_index]) throw bad_request(fmt::format("input '{}' appears more than once", name));
    const TensorSpec& spec = model.inputs[*spec_index];

    const auto& datatype_name = string_member(input, "datatype", fmt::format("input '{}'", name));
    const auto datatype = datatype_from_string(datatype_name);
    if (!datatype) throw bad_request(fmt::format("input '{}' has unknown datatype '{}'", name, datatype_name));
    if (*datatype != spec.datatype) {
      throw bad_request(fmt::format("input '{}' has datatype {}; model '{}' expects {}", name, datatype_name,
                                    model.name, to_string(spec.datatype)));
    }
    const json* shape_json = member(input, "shape");
    if (shape_json == nullptr) throw bad_request(fmt::format("input '{}' has no 'shape'", name));
    Tensor tensor{name, *datatype, parse_shape(*shape_json, name), {}};
    check_shape(spec, tensor.shape, model);
    const auto count = element_count(tensor.shape);
    if (!count) {
      throw bad_request(fmt::format("input '{}' shape {} has too many elements", name, shape_string(tensor.shape)));
    }

    std::optional<std::uint64_t> binary_size;
    if (const json* parameters = optional_object(input, "parameters", fmt::format("input '{}'", name))) {
      if (parameters->contains("shared_memory_region")) {
        throw bad_request(fmt::format("input '{}': the shared-memory extension is not supported", name));
      }
      if (const json* size = member(*parameters, "binary_data_size")) {
        binary_size = as_unsigned(*size);
        if (!binary_size) {
          throw bad_request(
              fmt::format("parameters.binary_data_size of input '{}' must be a non-negative integer, not {}", name,
                          excerpt(*size)));
        }
      }
    }
    const json* data = member(input, "data");
    if ((data != nullptr) == binary_size.has_value()) {
      throw bad_request(
          fmt::format("input '{}' must have exactly one of 'data' and parameters.binary_data_size", name));
    }
    if (binary_size) {
      const std::size_t available = binary.size() - binary_used;
      if (*binary_size > available) {
        throw bad_request(fmt::format(
            "input '{}' declares binary_data_size {} but only {} bytes follow the JSON header{}", name, *binary_size,
            available, header_length_given ? "" : " (binary data needs the Inference-Header-Content-Length header)"));
      }
      fill_from_binary(tensor, binary.substr(binary_used, static_cast<std::size_t>(*binary_size)), *count);
      binary_used += static_cast<std::size_t>(*binary_size);
    } else {
      fill_from_json(tensor, *data, *count);
    }
    by_spec[*spec_index] = std::move(tensor);
  }
  if (binary_used != binary.size()) {
    throw bad_request(
        fmt::format("{} bytes follow the JSON header but the inputs' binary_data_size values add up to {}",
                    binary.size(), binary_used));
  }
  request.inputs.reserve(model.inputs.size());
  for (std::size_t i = 0; i < by_spec.size(); ++i) {
    if (!by_spec[i]) {
      throw bad_request(
          fmt::format("model '{}' needs input '{}', which the request lacks", model.name, model.inputs[i].name));
    }
    request.inputs.push_back(std::move(*by_spec[i]));
  }
  request.batch_size = model.max_batch_size > 0 ? batch_size(request.inputs) : 1;
  request.model_batches = model.max_batch_size > 0;
}

// Inference-Header-Content-Length: 0 (extension_binary_data.md, "Raw Binary Request"): the body
// is the data of the model's only input, batch 1; at most one variable dimension, deduced from
// the byte count; a BYTES input has shape [1]; every output comes back binary.
InferRequest parse_raw_request(std::string_view body, const ModelMetadata& model) {
  if (model.inputs.size() != 1) {
    throw bad_request(
        fmt::format("a request with no inference header (Inference-Header-Content-Length: 0) needs a "
                    "model with one input; model '{}' has {}",
                    model.name, model.inputs.size()));
  }
  const TensorSpec& spec = model.inputs.front();
  const std::size_t first = model.max_batch_size > 0 ? 1 : 0;
  Tensor tensor{spec.name, spec.datatype, spec.shape, {}};
  if (first == 1) tensor.shape.front() = 1;
  if (spec.datatype == Datatype::bytes) {
    if (spec.shape.size() != first + 1 || (spec.shape[first] != 1 && spec.shape[first] != -1)) {
      throw bad_request(fmt::format("a raw binary request for BYTES input '{}' needs shape [1]; model '{}' declares {}",
                                    spec.name, model.name, shape_string(spec.shape)));
    }
    tensor.shape[first] = 1;
  } else {
    std::optional<std::size_t> variable;
    std::uint64_t fixed_bytes = element_size_bytes(spec.datatype);
    for (std::size_t i = first; i < spec.shape.size(); ++i) {
      if (spec.shape[i] == -1) {
        if (variable) {
          throw bad_request(
              fmt::format("a raw binary request for input '{}' needs at most one variable dimension; "
                          "model '{}' declares {}",
                          spec.name, model.name, shape_string(spec.shape)));
        }
        variable = i;
      } else if (__builtin_mul_overflow(fixed_bytes, static_cast<std::uint64_t>(spec.shape[i]), &fixed_bytes)) {
        throw bad_request(
            fmt::format("input '{}' shape {} has too many elements", spec.name, shape_string(spec.shape)));
      }
    }
    if (variable) {
      if (fixed_bytes != 0 && body.size() % fixed_bytes != 0) {
        throw bad_request(
            fmt::format("a raw binary body of {} bytes is not a multiple of {} bytes, the size of input "
                        "'{}' {} per step of its variable dimension",
                        body.size(), fixed_bytes, spec.name, shape_string(spec.shape)));
      }
      tensor.shape[*variable] = fixed_bytes == 0 ? 0 : static_cast<std::int64_t>(body.size() / fixed_bytes);
    }
  }
  const auto count = element_count(tensor.shape);
  if (!count) {
    throw bad_request(fmt::format("input '{}' shape {} has too many elements", spec.name, shape_string(tensor.shape)));
  }
  fill_from_binary(tensor, body, *count);

  InferRequest request;
  request.inputs.push_back(std::move(tensor));
  request.binary_data_output = true;
  request.model_batches = first == 1;
  return request;
}

InferRequest parse_request(std::string_view body, std::optional<std::size_t> header_length,
                           const ModelMetadata& model) {
  if (header_length && *header_length > body.size()) {
    throw bad_request(fmt::format("Inference-Header-Content-Length {} is larger than the body ({} bytes)",
                                  *header_length, body.size()));
  }
  if (header_length && *header_length == 0) return parse_raw_request(body, model);

  const auto header = body.substr(0, header_length.value_or(body.size()));
  const auto binary = body.substr(header.size());
  const auto not_json =
      header_length ? fmt::format("the first {} bytes of the body (Inference-Header-Content-Length) are not valid JSON",
                                  *header_length)
                    : std::string("the request body is not valid JSON");
  auto scan = detail::check_json_before_parsing(header, not_json, header_length.has_value(), model);
  json doc;
  try {
    doc = detail::parse_json_header(header, scan);
  } catch (const json::exception& e) {
    // parse_error, or out_of_range 406 for a number beyond a double (1e999).
    throw bad_request(fmt::format("{}: {}{}", not_json, e.what(),
                                  !scan.non_finite ? ""
                                                         : " (the position counts each NaN or Infinity token "
                                                           "as the longer string the parser was given for it)"));
  }
  if (!doc.is_object()) {
    throw bad_request(fmt::format("the inference request must be a JSON object, not {}", excerpt(doc)));
  }

  InferRequest request;
  if (const json* id = member(doc, "id")) {
    if (!id->is_string()) throw bad_request(fmt::format("'id' must be a string, not {}", excerpt(*id)));
    request.id = id->get<std::string>();
  }
  parse_request_parameters(doc, request);  // first: binary_data_output is the outputs' default
  parse_requested_outputs(doc, model, request);
  parse_inputs(doc, binary, header_length.has_value(), model, request);
  return request;
}

}  // namespace

std::size_t parse_header_length(std::string_view header_value) {
  auto text = header_value;
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  std::size_t length = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), length);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw bad_request(
        fmt::format("{} must be a byte count, not '{}'", kInferenceHeaderContentLength, header_value.substr(0, 40)));
  }
  return length;
}

InferRequest parse_infer_request(std::string_view body, std::optional<std::size_t> header_length,
                                 const ModelMetadata& model) {
  // Every way out is a ProtocolError: nlohmann's exceptions (a type mismatch this code missed),
  // memory exhaustion and anything else are converted, so the server needs one catch.
  try {
    return parse_request(body, header_length, model);
  } catch (const ProtocolError&) {
    throw;
  } catch (const json::exception& e) {
    throw bad_request(fmt::format("the inference request is malformed: {}", e.what()));
  } catch (const std::bad_alloc&) {
    throw bad_request("the inference request needs more memory than the server has");
  } catch (const std::exception& e) {
    throw ProtocolError(kInternalError, fmt::format("failed to parse the inference request: {}", e.what()));
  }
}

}  // namespace gpucap::service::kserve
