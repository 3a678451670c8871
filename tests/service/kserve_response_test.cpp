// The KServe v2 codec's responses (JSON and binary outputs, read back as tritonclient.http reads
// them), its model metadata and config (what perf_analyzer reads), and the batcher's concatenation
// and split of requests (a mismatch there is the server's own fault: 500).

#include "gpucap/service/kserve_protocol.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "service/kserve_codec_support.hpp"

namespace gpucap::service::kserve {
namespace {

using namespace codec_test;  // the codec tests' shared helpers (kserve_codec_support.hpp)

// How tritonclient.http's InferResult reads a response (http/_infer_result.py): the JSON header is
// the first Inference-Header-Content-Length bytes (the whole body without the header); binary
// outputs are consecutive slices of the rest, in the order of the "outputs" entries whose
// parameters carry binary_data_size. Outputs without it are read from "data".
struct ClientResult {
  json header;
  std::map<std::string, std::string> binary;  // name -> bytes
};

ClientResult read_like_tritonclient(const EncodedBody& encoded) {
  ClientResult result;
  const std::size_t header_length = encoded.header_length.value_or(encoded.body.size());
  result.header = json::parse(encoded.body.substr(0, header_length));
  std::size_t offset = header_length;
  for (const auto& output : result.header.at("outputs")) {
    if (output.contains("parameters") && output["parameters"].contains("binary_data_size")) {
      const auto size = output["parameters"]["binary_data_size"].get<std::size_t>();
      result.binary[output["name"].get<std::string>()] = encoded.body.substr(offset, size);
      offset += size;
    }
  }
  EXPECT_EQ(offset, encoded.body.size()) << "bytes left over after the binary outputs";
  return result;
}

// --- Responses ---

InferRequest request_for_outputs(std::vector<RequestedOutput> outputs, bool binary_data_output = false) {
  InferRequest request;
  request.outputs = std::move(outputs);
  request.binary_data_output = binary_data_output;
  return request;
}

TEST(KserveEncode, JsonOutputsAreFlatTypedArraysWithoutParameters) {
  InferResponse response{
      "simple",
      "1",
      "req-7",
      {make_tensor("OUTPUT0", Datatype::fp32, {2, 2}, bytes_of(std::vector<float>{0.1f, -2.5f, 1e20f, 3.0f})),
       make_tensor("OUTPUT1", Datatype::int64, {1, 2},
                   bytes_of(std::vector<std::int64_t>{-7, std::numeric_limits<std::int64_t>::max()})),
       make_tensor("FLAGS", Datatype::boolean, {3}, bytes_of(std::vector<std::uint8_t>{1, 0, 1}))}};
  const auto encoded = encode_infer_response(response, InferRequest{});
  EXPECT_FALSE(encoded.header_length);
  EXPECT_EQ(encoded.content_type, "application/json");
  // FP32 values are written in their shortest float form.
  EXPECT_NE(encoded.body.find("\"data\":[0.1,-2.5,1e+20,3]"), std::string::npos) << encoded.body;
  const auto doc = json::parse(encoded.body);
  EXPECT_EQ(doc["model_name"], "simple");
  EXPECT_EQ(doc["model_version"], "1");
  EXPECT_EQ(doc["id"], "req-7");
  ASSERT_EQ(doc["outputs"].size(), 3u);
  for (const auto& output : doc["outputs"]) {
    EXPECT_FALSE(output.contains("parameters")) << "the C++ client reads any parameters as binary: " << output;
  }
  EXPECT_EQ(doc["outputs"][0]["shape"], json({2, 2}));
  EXPECT_EQ(doc["outputs"][0]["datatype"], "FP32");
  EXPECT_EQ(static_cast<float>(doc["outputs"][0]["data"][0].get<double>()), 0.1f);
  EXPECT_EQ(doc["outputs"][1]["data"], json({-7, std::numeric_limits<std::int64_t>::max()}));
  EXPECT_EQ(doc["outputs"][2]["data"], json({true, false, true}));
}

TEST(KserveEncode, BinaryOutputsFollowTheHeaderInOrder) {
  const auto out0 = iota_int32(0, 16);
  const auto out1 = iota_int32(1000, 16);
  InferResponse response{"simple",
                         "1",
                         "",
                         {make_tensor("OUTPUT0", Datatype::int32, {1, 16}, bytes_of(out0)),
                          make_tensor("OUTPUT1", Datatype::int32, {1, 16}, bytes_of(out1))}};
  // OUTPUT1 asked for first and as binary, OUTPUT0 as JSON.
  const auto request = request_for_outputs({{"OUTPUT1", true}, {"OUTPUT0", false}});
  const auto encoded = encode_infer_response(response, request);
  ASSERT_TRUE(encoded.header_length);
  EXPECT_EQ(encoded.content_type, "application/octet-stream");
  EXPECT_EQ(encoded.body.size(), *encoded.header_length + 64);
  const auto header = json::parse(encoded.body.substr(0, *encoded.header_length));
  EXPECT_FALSE(header.contains("id"));  // Triton leaves out an empty id
  ASSERT_EQ(header["outputs"].size(), 2u);
  EXPECT_EQ(header["outputs"][0]["name"], "OUTPUT1");
  EXPECT_EQ(header["outputs"][0]["parameters"]["binary_data_size"], 64);
  EXPECT_FALSE(header["outputs"][0].contains("data"));
  EXPECT_EQ(header["outputs"][1]["data"], json(out0));
  EXPECT_EQ(encoded.body.substr(*encoded.header_length), raw(out1));
}

TEST(KserveEncode, AResponseReadsBackAsTritonclientHttpReadsIt) {
  // The Python client without requested outputs sends binary_data_output: true.
  const auto model = image_model();
  std::vector<float> pixels(3 * 224 * 224, 0.25f);
  const json header = {{"parameters", {{"binary_data_output", true}}},
                       {"inputs", {binary_input_json("INPUT__0", "FP32", {1, 3, 224, 224}, pixels.size() * 4)}}};
  const auto text = header.dump();
  const auto request = parse_infer_request(text + raw(pixels), text.size(), model);
  std::vector<float> scores(1000);
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(i) * 0.001f;
  const InferResponse response{
      "resnet50", "1", "", {make_tensor("OUTPUT__0", Datatype::fp32, {1, 1000}, bytes_of(scores))}};
  const auto client = read_like_tritonclient(encode_infer_response(response, request));
  EXPECT_EQ(client.header["model_name"], "resnet50");
  ASSERT_EQ(client.binary.count("OUTPUT__0"), 1u);
  EXPECT_EQ(client.binary.at("OUTPUT__0"), raw(scores));  // np.frombuffer(..., float32).reshape([1, 1000])
  EXPECT_EQ(client.header["outputs"][0]["shape"], json({1, 1000}));

  // And with outputs requested as JSON, as InferRequestedOutput(name, binary_data=False) does.
  json json_header = header;
  json_header["parameters"] = json::object();
  json_header["outputs"] = {{{"name", "OUTPUT__0"}, {"parameters", {{"binary_data", false}}}}};
  const auto json_text = json_header.dump();
  const auto json_request = parse_infer_request(json_text + raw(pixels), json_text.size(), model);
  const auto json_client = read_like_tritonclient(encode_infer_response(response, json_request));
  EXPECT_TRUE(json_client.binary.empty());
  const auto& data = json_client.header["outputs"][0]["data"];
  ASSERT_EQ(data.size(), 1000u);
  for (std::size_t i = 0; i < scores.size(); ++i) EXPECT_EQ(static_cast<float>(data[i].get<double>()), scores[i]) << i;
}

TEST(KserveEncode, OutputSelectionFollowsTheRequest) {
  InferResponse response{"simple",
                         "1",
                         "",
                         {make_tensor("OUTPUT0", Datatype::int32, {1, 1}, bytes_of(std::vector<std::int32_t>{1})),
                          make_tensor("OUTPUT1", Datatype::int32, {1, 1}, bytes_of(std::vector<std::int32_t>{2}))}};
  const auto all_binary = encode_infer_response(response, request_for_outputs({}, true));
  ASSERT_TRUE(all_binary.header_length);
  EXPECT_EQ(all_binary.body.substr(*all_binary.header_length), raw(std::vector<std::int32_t>{1, 2}));

  const auto only_one = json::parse(encode_infer_response(response, request_for_outputs({{"OUTPUT1", false}})).body);
  ASSERT_EQ(only_one["outputs"].size(), 1u);
  EXPECT_EQ(only_one["outputs"][0]["name"], "OUTPUT1");

  expect_protocol_error(
      [&] {
        (void)encode_infer_response(response, request_for_outputs({{"MISSING", false}}));
      },
      500, "model 'simple' produced no output 'MISSING'");
  response.outputs[0].data.pop_back();
  expect_protocol_error([&] { (void)encode_infer_response(response, InferRequest{}); }, 500,
                        "INT32 tensor 'OUTPUT0' has shape [1,1] (1 elements) but holds 3 bytes");
}

TEST(KserveEncode, BytesHalfAndNonFiniteOutputsAsJson) {
  std::vector<std::byte> strings;
  append_bytes_element(strings, "cat");
  append_bytes_element(strings, "say \"hi\"");
  const InferResponse response{
      "m",
      "1",
      "",
      {make_tensor("labels", Datatype::bytes, {2}, strings),
       make_tensor("half", Datatype::fp16, {3}, bytes_of(std::vector<std::uint16_t>{0x3c00, 0xc000, 0x7bff})),
       make_tensor("brain", Datatype::bf16, {1}, bytes_of(std::vector<std::uint16_t>{0x3f80})),
       make_tensor("odd", Datatype::fp64, {3}, bytes_of(std::vector<double>{std::nan(""), INFINITY, 1.5}))}};
  const auto doc = json::parse(encode_infer_response(response, InferRequest{}).body);
  EXPECT_EQ(doc["outputs"][0]["data"], json({"cat", "say \"hi\""}));
  EXPECT_EQ(doc["outputs"][1]["data"], json({1, -2, 65504}));
  EXPECT_EQ(doc["outputs"][2]["data"], json({1}));
  EXPECT_EQ(doc["outputs"][3]["data"], json({nullptr, nullptr, 1.5}));  // np.array([None], float) is nan

  std::vector<std::byte> binary_string;
  append_bytes_element(binary_string, std::string("\xff\xfe", 2));
  const InferResponse not_text{"m", "1", "", {make_tensor("blob", Datatype::bytes, {1}, binary_string)}};
  expect_protocol_error([&] { (void)encode_infer_response(not_text, InferRequest{}); }, 400,
                        "output 'blob' holds bytes that are not UTF-8 text");
  const auto as_binary = encode_infer_response(not_text, request_for_outputs({}, true));
  ASSERT_TRUE(as_binary.header_length);
  EXPECT_EQ(as_binary.body.substr(*as_binary.header_length), std::string("\x02\0\0\0\xff\xfe", 6));
}

TEST(KserveEncode, ErrorBodies) {
  EXPECT_EQ(json::parse(error_json("input 'x' is \"bad\"")), json({{"error", "input 'x' is \"bad\""}}));
  const auto replaced = json::parse(error_json(std::string("bad \xff byte")));
  EXPECT_EQ(replaced["error"], "bad \xEF\xBF\xBD byte");
}

// --- Metadata and config ---

TEST(KserveMetadata, ModelMetadataHasKServesForm) {
  const auto doc = to_json(image_model());
  EXPECT_EQ(doc, json::parse(R"({
    "name": "resnet50", "versions": ["1"], "platform": "pytorch_libtorch",
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [-1, 3, 224, 224]}],
    "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [-1, 1000]}]})"));
}

TEST(KserveMetadata, ModelConfigIsWhatPerfAnalyzerReads) {
  auto model = image_model();
  model.inputs.push_back({"label", Datatype::bytes, {-1, 1}});
  const auto config = model_config_json(model, true);
  EXPECT_EQ(config["name"], "resnet50");
  EXPECT_EQ(config["max_batch_size"], 32);
  EXPECT_EQ(config["input"][0], json({{"name", "INPUT__0"}, {"data_type", "TYPE_FP32"}, {"dims", {3, 224, 224}}}));
  EXPECT_EQ(config["input"][1]["data_type"], "TYPE_STRING");
  EXPECT_EQ(config["output"][0]["dims"], json({1000}));
  EXPECT_EQ(config["dynamic_batching"], json::object());
  EXPECT_FALSE(model_config_json(model, false).contains("dynamic_batching"));
  ModelMetadata unbatched{"u", {}, "custom", {{"x", Datatype::int8, {4}}}, {{"y", Datatype::int8, {4}}}, 0};
  EXPECT_EQ(model_config_json(unbatched, false)["input"][0]["dims"], json({4}));
}

TEST(KserveMetadata, ServerMetadata) {
  const std::vector<std::string> extensions = {"binary_tensor_data", "classification", "schedule_policy",
                                               "model_configuration"};
  EXPECT_EQ(server_metadata_json("gpucap", "0.9.0", extensions),
            json({{"name", "gpucap"}, {"version", "0.9.0"}, {"extensions", extensions}}));
}

TEST(KserveMetadata, BadModelMetadataIsRefusedAtLoad) {
  EXPECT_NO_THROW(validate_model_metadata(image_model()));
  EXPECT_NO_THROW(validate_model_metadata(simple_model()));
  auto unbatched_first_dim = image_model();
  unbatched_first_dim.inputs[0].shape = {1, 3, 224, 224};
  EXPECT_THROW(validate_model_metadata(unbatched_first_dim), Error);
  auto duplicate = simple_model();
  duplicate.inputs[1].name = "INPUT0";
  EXPECT_THROW(validate_model_metadata(duplicate), Error);
  auto bad_dim = simple_model();
  bad_dim.outputs[0].shape = {-1, -2};
  EXPECT_THROW(validate_model_metadata(bad_dim), Error);
  auto no_outputs = simple_model();
  no_outputs.outputs.clear();
  EXPECT_THROW(validate_model_metadata(no_outputs), Error);
}

// --- Batching ---

InferRequest simple_request(std::int64_t batch, std::int32_t seed) {
  const auto model = simple_model();
  const auto n = static_cast<std::size_t>(batch) * 16;
  const json request = {{"inputs",
                         {input_json("INPUT0", "INT32", {batch, 16}, iota_int32(seed, n)),
                          input_json("INPUT1", "INT32", {batch, 16}, iota_int32(seed + 10000, n))}}};
  return parse_infer_request(request.dump(), std::nullopt, model);
}

TEST(KserveBatch, ConcatThenSplitGivesEachRequestItsRows) {
  const auto a = simple_request(1, 0);
  const auto b = simple_request(3, 100);
  const auto c = simple_request(2, 900);
  const std::vector<const InferRequest*> requests = {&a, &b, &c};
  const auto batched = concat_inputs(requests);
  ASSERT_EQ(batched.size(), 2u);
  EXPECT_EQ(batched[0].name, "INPUT0");
  EXPECT_EQ(batched[0].shape, (std::vector<std::int64_t>{6, 16}));
  auto expected = iota_int32(0, 16);
  for (const auto& part : {iota_int32(100, 48), iota_int32(900, 32)})
    expected.insert(expected.end(), part.begin(), part.end());
  EXPECT_EQ(values_of<std::int32_t>(batched[0].data), expected);

  // The "model" echoes its inputs as outputs; splitting returns each request's own rows.
  const std::vector<std::int64_t> sizes = {a.batch_size, b.batch_size, c.batch_size};
  const auto per_request = split_outputs(batched, sizes);
  ASSERT_EQ(per_request.size(), 3u);
  EXPECT_EQ(per_request[1][0].shape, (std::vector<std::int64_t>{3, 16}));
  EXPECT_EQ(per_request[1][0].data, b.inputs[0].data);
  EXPECT_EQ(per_request[2][1].data, c.inputs[1].data);
  EXPECT_EQ(per_request[0][0].data, a.inputs[0].data);
}

TEST(KserveBatch, BytesTensorsSplitOnElementBoundaries) {
  std::vector<std::byte> data;
  for (const char* s : {"a", "bb", "", "dddd", "e", "ff"}) append_bytes_element(data, s);
  const auto batched = make_tensor("labels", Datatype::bytes, {3, 2}, data);
  const std::vector<std::int64_t> sizes = {2, 1};
  const auto pieces = split_batch(batched, sizes);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].shape, (std::vector<std::int64_t>{2, 2}));
  const auto first = bytes_elements(pieces[0].data);
  EXPECT_EQ(first, (std::vector<std::string_view>{"a", "bb", "", "dddd"}));
  EXPECT_EQ(bytes_elements(pieces[1].data), (std::vector<std::string_view>{"e", "ff"}));
  const std::vector<const Tensor*> parts = {&pieces[0], &pieces[1]};
  EXPECT_EQ(concat_batch(parts).data, data);
}

// What the LibTorch backend does with a buffer it keeps across batches: the layout concat_batch
// would make, and the parts' bytes copied into it, the same bytes as concat_batch's.
TEST(KserveBatch, CopyBatchFillsABufferAsConcatBatchWould) {
  const auto a = simple_request(1, 0);
  const auto b = simple_request(3, 100);
  const std::vector<const Tensor*> parts = {&a.inputs[0], &b.inputs[0]};
  const auto layout = batch_layout(parts);
  EXPECT_EQ(layout.shape, (std::vector<std::int64_t>{4, 16}));
  EXPECT_EQ(layout.bytes, 4u * 16u * 4u);
  std::vector<std::byte> buffer(layout.bytes, std::byte{0x5a});
  copy_batch(parts, buffer);
  EXPECT_EQ(buffer, concat_batch(parts).data);

  std::vector<std::byte> short_buffer(layout.bytes - 4);
  expect_protocol_error([&] { copy_batch(parts, short_buffer); }, 500, "does not fit its parts");
  std::vector<std::byte> long_buffer(layout.bytes + 4);
  expect_protocol_error([&] { copy_batch(parts, long_buffer); }, 500, "got 256 from its parts");
  const auto other = make_tensor("INPUT0", Datatype::fp32, {1, 16}, bytes_of(std::vector<float>(16, 1.0f)));
  const std::vector<const Tensor*> mixed = {&a.inputs[0], &other};
  expect_protocol_error([&] { (void)batch_layout(mixed); }, 500, "cannot batch tensor 'INPUT0' INT32 [1,16]");
}

TEST(KserveBatch, MismatchesAreServerFaults) {
  const auto batched = make_tensor("y", Datatype::fp32, {3, 2}, bytes_of(std::vector<float>(6, 1.0f)));
  const std::vector<std::int64_t> wrong = {1, 1};
  expect_protocol_error([&] { (void)split_batch(batched, wrong); }, 500, "output 'y' has 3 rows but the batch had 2");
  const auto other = make_tensor("y", Datatype::fp32, {1, 3}, bytes_of(std::vector<float>(3, 1.0f)));
  const std::vector<const Tensor*> parts = {&batched, &other};
  expect_protocol_error([&] { (void)concat_batch(parts); }, 500,
                        "cannot batch tensor 'y' FP32 [3,2] with 'y' FP32 [1,3]");
  const std::vector<Tensor> disagreeing = {make_tensor("a", Datatype::fp32, {2, 1}, {}),
                                           make_tensor("b", Datatype::fp32, {3, 1}, {})};
  expect_protocol_error([&] { (void)batch_size(disagreeing); }, 400,
                        "inputs disagree on the batch size: 'a' has 2, 'b' has 3");
}


}  // namespace
}  // namespace gpucap::service::kserve
