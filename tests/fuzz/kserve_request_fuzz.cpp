// `gpucap serve`'s inference requests: POST v2/models/{m}/infer bodies, JSON or with Triton's
// binary tensor extension (Inference-Header-Content-Length), parsed and validated against the
// model (service/kserve_protocol: parse_infer_request, parse_header_length), then answered as the
// server answers them: the requests batched (concat_inputs), outputs of the model's shape split
// back per request (split_outputs) and encoded (encode_infer_response).
//
// Input: byte 0 picks the model (Triton's "simple", an image model, a model of every other
// datatype with variable dimensions, a model without a batch dimension); byte 1 the framing:
// 0 plain JSON, 1 "raw binary" (header length 0), 2 the header length as a decimal line before
// the body, 3 the header length at the body's first NUL byte. The rest is the body.
// Oracle: every refusal is a ProtocolError(400) (a 500 is a server bug); a parsed request holds
// exactly the model's inputs, each with whole, well-formed data; the answer encodes. And the JSON
// pre-scan's own reading of flat arrays of numbers (kserve_json_guard, here from one number up)
// gives the document nlohmann's parser gives, or the same refusal, word for word.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "gpucap/service/kserve_protocol.hpp"
#include "kserve_json_guard.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::finding;
namespace kserve = gpucap::service::kserve;
using kserve::Datatype;

namespace {

const std::vector<kserve::ModelMetadata>& models() {
  static const std::vector<kserve::ModelMetadata> all = [] {
    std::vector<kserve::ModelMetadata> m = {
        {"simple",
         {"1"},
         "pytorch_libtorch",
         {{"INPUT0", Datatype::int32, {-1, 16}}, {"INPUT1", Datatype::int32, {-1, 16}}},
         {{"OUTPUT0", Datatype::int32, {-1, 16}}, {"OUTPUT1", Datatype::int32, {-1, 16}}},
         8},
        {"image", {"1"}, "twin", {{"input", Datatype::fp32, {-1, 3, 4, 4}}}, {{"output", Datatype::fp32, {-1, 10}}}, 4},
        {"mixed",
         {"1"},
         "pytorch_libtorch",
         {{"TEXT", Datatype::bytes, {-1, -1}},
          {"MASK", Datatype::boolean, {-1, 2}},
          {"HALF", Datatype::fp16, {-1, 2}},
          {"SMALL", Datatype::int8, {-1, 1}},
          {"WIDE", Datatype::uint64, {-1, -1}}},
         {{"LABEL", Datatype::bytes, {-1, 1}}, {"SCORE", Datatype::fp64, {-1, 2}}, {"B16", Datatype::bf16, {-1, 2}}},
         16},
        {"fixed",
         {"1"},
         "pytorch_libtorch",
         {{"X", Datatype::uint16, {2, 2}}, {"Y", Datatype::fp64, {-1}}},
         {{"Z", Datatype::uint8, {3}}, {"W", Datatype::int64, {2}}},
         0},
    };
    for (const auto& model : m) kserve::validate_model_metadata(model);
    return m;
  }();
  return all;
}

// An output of the model for `batch` rows: its shape with the batch dimension (and any other
// variable one) filled in, zeros (empty strings for BYTES), as the twin backend answers.
kserve::Tensor zeros(const kserve::TensorSpec& spec, const kserve::ModelMetadata& model, std::int64_t batch) {
  kserve::Tensor t;
  t.name = spec.name;
  t.datatype = spec.datatype;
  for (std::size_t i = 0; i < spec.shape.size(); ++i) {
    t.shape.push_back(spec.shape[i] >= 0 ? spec.shape[i] : (i == 0 && model.max_batch_size > 0 ? batch : 1));
  }
  const auto count = kserve::element_count(t.shape).value_or(0);
  if (spec.datatype == Datatype::bytes) {
    for (std::uint64_t i = 0; i < count; ++i) kserve::append_bytes_element(t.data, "");
  } else {
    t.data.resize(count * kserve::element_size_bytes(spec.datatype));
  }
  return t;
}

template <typename F>
void protocol_refusals_only(F&& call) {
  try {
    call();
  } catch (const kserve::ProtocolError& e) {
    if (e.http_status() != kserve::kBadRequest) finding("a ProtocolError " + std::to_string(e.http_status()) + ": " + e.what());
  } catch (const std::exception& e) {
    finding(std::string("an exception that is not a ProtocolError: ") + e.what());
  }
}

// A document as text with every number's type: dump() writes an unsigned 5 and a signed 5 alike.
std::string typed_text(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::array: {
      std::string out = "[";
      for (const auto& element : value) out += typed_text(element) + ",";
      return out + "]";
    }
    case nlohmann::json::value_t::object: {
      std::string out = "{";
      for (const auto& [key, element] : value.items()) {
        out += nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ":" + typed_text(element) + ",";
      }
      return out + "}";
    }
    case nlohmann::json::value_t::number_unsigned: return "u" + value.dump();
    case nlohmann::json::value_t::number_integer: return "i" + value.dump();
    case nlohmann::json::value_t::number_float: return "f" + value.dump();
    default: return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

// The document (as typed text) or the refusal the JSON header `text` gets, with the pre-scan
// reading every flat array of at least `min_fast_array` numbers.
std::string reading(std::string_view text, const kserve::ModelMetadata& model, std::size_t min_fast_array) {
  namespace detail = gpucap::service::kserve::detail;
  try {
    auto scan = detail::check_json_before_parsing(text, "not JSON", false, model, min_fast_array);
    return typed_text(detail::parse_json_header(text, scan));
  } catch (const kserve::ProtocolError& e) {
    return std::string("refused: ") + e.what();
  } catch (const nlohmann::json::exception& e) {
    return std::string("not parsed: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  const auto& model = models()[input.choice(static_cast<unsigned>(models().size()))];
  const unsigned framing = input.choice(4);
  std::optional<std::size_t> header_length;
  bool framed = true;
  if (framing == 1) header_length = 0;
  if (framing == 2) {
    const auto line = input.until("\n");
    protocol_refusals_only([&] { header_length = kserve::parse_header_length(line); });
    framed = header_length.has_value();
  }
  const auto body = input.rest();
  if (framing == 3) {
    const auto nul = body.find('\0');
    header_length = nul == std::string_view::npos ? body.size() : nul;
  }
  if (!framed) return 0;
  if (!header_length || *header_length > 0) {
    const auto header = body.substr(0, std::min(header_length.value_or(body.size()), body.size()));
    check(reading(header, model, 1) == reading(header, model, std::numeric_limits<std::size_t>::max()),
          "the pre-scan read an array of numbers otherwise than nlohmann's parser");
  }

  protocol_refusals_only([&] {
    const auto request = kserve::parse_infer_request(body, header_length, model);
    check(request.inputs.size() == model.inputs.size(), "a request without exactly the model's inputs");
    for (std::size_t i = 0; i < request.inputs.size(); ++i) {
      const auto& tensor = request.inputs[i];
      check(tensor.name == model.inputs[i].name && tensor.datatype == model.inputs[i].datatype, "an input out of the model's order");
      kserve::check_tensor_data(tensor, kserve::kInternalError);  // whole, well-formed data (a 500 is a finding)
    }
    check(request.batch_size >= 1 && (model.max_batch_size == 0 ? request.batch_size == 1 : request.batch_size <= model.max_batch_size),
          "a batch size outside the model's range");
    for (const auto& output : request.outputs) {
      bool declared = false;
      for (const auto& spec : model.outputs) declared = declared || spec.name == output.name;
      check(declared, "a requested output the model does not declare");
    }
    // As the server answers: batched with a second request, run, split back, encoded.
    std::vector<kserve::Tensor> outputs;
    if (model.max_batch_size > 0) {
      const kserve::InferRequest* both[] = {&request, &request};
      const auto batched = kserve::concat_inputs(both);
      check(batched.size() == request.inputs.size(), "concat_inputs lost an input");
      std::vector<kserve::Tensor> batched_outputs;
      for (const auto& spec : model.outputs) batched_outputs.push_back(zeros(spec, model, 2 * request.batch_size));
      const std::int64_t sizes[] = {request.batch_size, request.batch_size};
      auto split = kserve::split_outputs(batched_outputs, sizes);
      check(split.size() == 2, "split_outputs did not give one set per request");
      outputs = std::move(split[0]);
    } else {
      for (const auto& spec : model.outputs) outputs.push_back(zeros(spec, model, 1));
    }
    const kserve::InferResponse response{model.name, "1", request.id, std::move(outputs)};
    const auto encoded = kserve::encode_infer_response(response, request);
    const auto header = encoded.body.substr(0, encoded.header_length.value_or(encoded.body.size()));
    check(nlohmann::json::accept(header), "a response whose JSON header does not parse");
    (void)kserve::error_json(request.id);
  });
  return 0;
}
