// The KServe v2 codec against the requests Triton's clients send (tritonclient.http and the C++
// client under perf_analyzer) and every malformed body we could think of: each refusal is a
// ProtocolError with status 400 (500 for the server's own faults) and a message naming the problem.

#include "gpucap/service/kserve_protocol.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpucap::service::kserve {
namespace {

using nlohmann::json;

// --- Helpers ---

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<T> values_of(const std::vector<std::byte>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

template <typename T>
std::string raw(const std::vector<T>& values) {
  const auto bytes = bytes_of(values);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::string raw_bytes_tensor(const std::vector<std::string>& elements) {
  std::vector<std::byte> data;
  for (const auto& e : elements) append_bytes_element(data, e);
  return {reinterpret_cast<const char*>(data.data()), data.size()};
}

void expect_protocol_error(const std::function<void()>& call, int status, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error; expected " << status << " containing: " << fragment;
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.http_status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ProtocolError: " << e.what();
  }
}

// Triton's "simple" example model: two INT32 [-1, 16] inputs, batching up to 8.
ModelMetadata simple_model() {
  return {"simple",
          {"1"},
          "pytorch_libtorch",
          {{"INPUT0", Datatype::int32, {-1, 16}}, {"INPUT1", Datatype::int32, {-1, 16}}},
          {{"OUTPUT0", Datatype::int32, {-1, 16}}, {"OUTPUT1", Datatype::int32, {-1, 16}}},
          8};
}

ModelMetadata image_model() {
  return {"resnet50",
          {"1"},
          "pytorch_libtorch",
          {{"INPUT__0", Datatype::fp32, {-1, 3, 224, 224}}},
          {{"OUTPUT__0", Datatype::fp32, {-1, 1000}}},
          32};
}

// One input "x" of `datatype` with shape [-1, -1], batching up to 4.
ModelMetadata typed_model(Datatype datatype) {
  return {"typed", {"1"}, "custom", {{"x", datatype, {-1, -1}}}, {{"y", datatype, {-1, -1}}}, 4};
}

json input_json(const std::string& name, const std::string& datatype, const std::vector<std::int64_t>& shape,
                const json& data) {
  return {{"name", name}, {"datatype", datatype}, {"shape", shape}, {"data", data}};
}

json binary_input_json(const std::string& name, const std::string& datatype, const std::vector<std::int64_t>& shape,
                       std::size_t size) {
  return {{"name", name}, {"datatype", datatype}, {"shape", shape}, {"parameters", {{"binary_data_size", size}}}};
}

json typed_request(const std::string& datatype, const json& data) {
  return {{"inputs", {input_json("x", datatype, {1, static_cast<std::int64_t>(data.size())}, data)}}};
}

std::vector<std::int32_t> iota_int32(std::int32_t from, std::size_t count) {
  std::vector<std::int32_t> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = from + static_cast<std::int32_t>(i);
  return values;
}

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

Tensor make_tensor(const std::string& name, Datatype datatype, std::vector<std::int64_t> shape,
                   std::vector<std::byte> data) {
  return {name, datatype, std::move(shape), std::move(data)};
}

// --- Datatypes ---

TEST(KserveDatatype, NamesRoundTripAndAreCaseSensitive) {
  const std::vector<std::pair<Datatype, std::string>> all = {
      {Datatype::boolean, "BOOL"},  {Datatype::uint8, "UINT8"},   {Datatype::uint16, "UINT16"},
      {Datatype::uint32, "UINT32"}, {Datatype::uint64, "UINT64"}, {Datatype::int8, "INT8"},
      {Datatype::int16, "INT16"},   {Datatype::int32, "INT32"},   {Datatype::int64, "INT64"},
      {Datatype::fp16, "FP16"},     {Datatype::fp32, "FP32"},     {Datatype::fp64, "FP64"},
      {Datatype::bytes, "BYTES"},   {Datatype::bf16, "BF16"}};
  for (const auto& [datatype, name] : all) {
    EXPECT_EQ(to_string(datatype), name);
    EXPECT_EQ(datatype_from_string(name), datatype) << name;
  }
  EXPECT_FALSE(datatype_from_string("fp32"));
  EXPECT_FALSE(datatype_from_string("FLOAT32"));
  EXPECT_FALSE(datatype_from_string(""));
  EXPECT_EQ(element_size_bytes(Datatype::boolean), 1u);
  EXPECT_EQ(element_size_bytes(Datatype::fp16), 2u);
  EXPECT_EQ(element_size_bytes(Datatype::bf16), 2u);
  EXPECT_EQ(element_size_bytes(Datatype::fp32), 4u);
  EXPECT_EQ(element_size_bytes(Datatype::int64), 8u);
  EXPECT_EQ(element_size_bytes(Datatype::bytes), 0u);
}

TEST(KserveDatatype, HalfFloatsConvert) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(fp16_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7e00)));
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
}

TEST(KserveTensor, ElementCountRefusesNegativeAndOverflow) {
  EXPECT_EQ(element_count(std::vector<std::int64_t>{2, 3, 4}), 24u);
  EXPECT_EQ(element_count(std::vector<std::int64_t>{}), 1u);
  EXPECT_FALSE(element_count(std::vector<std::int64_t>{2, -1}));
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_FALSE(element_count(std::vector<std::int64_t>{big, big}));
}

// --- JSON requests ---

TEST(KserveParse, NestedAndFlatDataGiveTheSameTensor) {
  const auto model = simple_model();
  const auto values = iota_int32(0, 16);
  const json nested = json::array({values});  // [[0..15]]
  ASSERT_TRUE(nested.size() == 1 && nested[0].is_array() && nested[0].size() == 16);
  const json flat_request = {
      {"inputs", {input_json("INPUT0", "INT32", {1, 16}, values), input_json("INPUT1", "INT32", {1, 16}, values)}}};
  const json nested_request = {
      {"inputs", {input_json("INPUT0", "INT32", {1, 16}, nested), input_json("INPUT1", "INT32", {1, 16}, nested)}}};
  const auto flat = parse_infer_request(flat_request.dump(), std::nullopt, model);
  const auto deep = parse_infer_request(nested_request.dump(), std::nullopt, model);
  ASSERT_EQ(flat.inputs.size(), 2u);
  EXPECT_EQ(flat.inputs[0].data, bytes_of(values));
  EXPECT_EQ(deep.inputs[0].data, flat.inputs[0].data);
  EXPECT_EQ(deep.inputs[1].data, flat.inputs[1].data);
  EXPECT_EQ(flat.inputs[0].shape, (std::vector<std::int64_t>{1, 16}));
  EXPECT_EQ(flat.batch_size, 1);
  EXPECT_TRUE(flat.outputs.empty());
  EXPECT_FALSE(flat.binary_data_output);
}

TEST(KserveParse, EveryJsonDatatypeIsConvertedToItsBytes) {
  {
    const auto r = parse_infer_request(typed_request("BOOL", {true, false, true}).dump(), std::nullopt,
                                       typed_model(Datatype::boolean));
    EXPECT_EQ(values_of<std::uint8_t>(r.inputs[0].data), (std::vector<std::uint8_t>{1, 0, 1}));
  }
  {
    const auto r =
        parse_infer_request(typed_request("INT8", {-128, 0, 127}).dump(), std::nullopt, typed_model(Datatype::int8));
    EXPECT_EQ(values_of<std::int8_t>(r.inputs[0].data), (std::vector<std::int8_t>{-128, 0, 127}));
  }
  {
    const auto r =
        parse_infer_request(typed_request("UINT16", {0, 65535}).dump(), std::nullopt, typed_model(Datatype::uint16));
    EXPECT_EQ(values_of<std::uint16_t>(r.inputs[0].data), (std::vector<std::uint16_t>{0, 65535}));
  }
  {
    const auto max = std::numeric_limits<std::uint64_t>::max();
    const auto r =
        parse_infer_request(typed_request("UINT64", {max, 0}).dump(), std::nullopt, typed_model(Datatype::uint64));
    EXPECT_EQ(values_of<std::uint64_t>(r.inputs[0].data), (std::vector<std::uint64_t>{max, 0}));
  }
  {
    const auto min = std::numeric_limits<std::int64_t>::min();
    const auto r =
        parse_infer_request(typed_request("INT64", {min, 7}).dump(), std::nullopt, typed_model(Datatype::int64));
    EXPECT_EQ(values_of<std::int64_t>(r.inputs[0].data), (std::vector<std::int64_t>{min, 7}));
  }
  {
    // FP32 takes integers too (a JSON 1 is a number), and rounds to float.
    const auto r =
        parse_infer_request(typed_request("FP32", {1, 0.1, -2.5}).dump(), std::nullopt, typed_model(Datatype::fp32));
    EXPECT_EQ(values_of<float>(r.inputs[0].data), (std::vector<float>{1.0f, 0.1f, -2.5f}));
  }
  {
    const auto r =
        parse_infer_request(typed_request("FP64", {0.1, 1e300}).dump(), std::nullopt, typed_model(Datatype::fp64));
    EXPECT_EQ(values_of<double>(r.inputs[0].data), (std::vector<double>{0.1, 1e300}));
  }
  {
    const auto r = parse_infer_request(typed_request("BYTES", {"ab", "", "wörld"}).dump(), std::nullopt,
                                       typed_model(Datatype::bytes));
    const auto elements = bytes_elements(r.inputs[0].data);
    ASSERT_EQ(elements.size(), 3u);
    EXPECT_EQ(elements[0], "ab");
    EXPECT_EQ(elements[1], "");
    EXPECT_EQ(elements[2], "wörld");
    EXPECT_EQ(r.inputs[0].data.size(), 3 * 4 + 2 + 0 + std::string("wörld").size());
  }
}

TEST(KserveParse, ValuesOutOfRangeOrOfTheWrongTypeAreRefused) {
  struct Case {
    Datatype datatype;
    json data;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {Datatype::int8, {1, 300}, "element 1: 300 is not an integer in [-128, 127] (INT8)"},
      {Datatype::int8, {-129}, "element 0: -129 is not an integer in [-128, 127]"},
      {Datatype::uint8, {-1}, "is not an integer in [0, 255] (UINT8)"},
      {Datatype::uint32, {4294967296LL}, "4294967296 is not an integer in [0, 4294967295]"},
      {Datatype::int32, {2.5}, "2.5 is not an integer"},
      {Datatype::int64, {1.0}, "1.0 is not an integer"},
      {Datatype::fp32, {1.0, "x"}, "element 1: \"x\" is not a number within FP32 range"},
      {Datatype::fp32, {1e39}, "is not a number within FP32 range"},
      {Datatype::fp64, {nullptr}, "null is not a number within FP64 range"},
      {Datatype::boolean, {1}, "element 0: 1 is not true or false (BOOL)"},
      {Datatype::boolean, {"true"}, "is not true or false"},
      {Datatype::bytes, {"a", 5}, "element 1: 5 is not a string (BYTES)"},
      {Datatype::fp32, {{{"a", 1}}}, "an object is not a number"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.data.dump());
    const auto body = typed_request(std::string(to_string(c.datatype)), c.data).dump();
    expect_protocol_error([&] { (void)parse_infer_request(body, std::nullopt, typed_model(c.datatype)); }, 400,
                          c.fragment);
  }
}

TEST(KserveParse, HalfPrecisionInputsMustBeBinary) {
  for (const auto datatype : {Datatype::fp16, Datatype::bf16}) {
    const auto body = typed_request(std::string(to_string(datatype)), {1.0}).dump();
    expect_protocol_error([&] { (void)parse_infer_request(body, std::nullopt, typed_model(datatype)); }, 400,
                          "cannot be sent as JSON; send it as binary data");
  }
}

TEST(KserveParse, ElementCountMustMatchTheShape) {
  const auto model = simple_model();
  const json short_data = {{"inputs",
                            {input_json("INPUT0", "INT32", {1, 16}, iota_int32(0, 15)),
                             input_json("INPUT1", "INT32", {1, 16}, iota_int32(0, 16))}}};
  expect_protocol_error([&] { (void)parse_infer_request(short_data.dump(), std::nullopt, model); }, 400,
                        "input 'INPUT0' has shape [1,16] (16 elements) but 'data' holds 15");
  // A huge declared shape with three values is refused before anything is sized by the shape.
  const json huge = {{"inputs", {input_json("x", "FP32", {1, 1'000'000'000'000LL}, {1, 2, 3})}}};
  expect_protocol_error([&] { (void)parse_infer_request(huge.dump(), std::nullopt, typed_model(Datatype::fp32)); }, 400,
                        "(1000000000000 elements) but 'data' holds 3");
  const json overflow = {{"inputs", {input_json("x", "FP32", {4, std::numeric_limits<std::int64_t>::max()}, {1})}}};
  expect_protocol_error([&] { (void)parse_infer_request(overflow.dump(), std::nullopt, typed_model(Datatype::fp32)); },
                        400, "has too many elements");
}

TEST(KserveParse, RequestsAreValidatedAgainstTheModel) {
  const auto model = simple_model();
  const auto sixteen = iota_int32(0, 16);
  const auto in0 = input_json("INPUT0", "INT32", {1, 16}, sixteen);
  const auto in1 = input_json("INPUT1", "INT32", {1, 16}, sixteen);
  struct Case {
    json inputs;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{in0}, "model 'simple' needs input 'INPUT1', which the request lacks"},
      {{in0, in1, input_json("EXTRA", "INT32", {1, 16}, sixteen)},
       "unknown input 'EXTRA' for model 'simple' (its inputs: INPUT0, INPUT1)"},
      {{in0, in0, in1}, "input 'INPUT0' appears more than once"},
      {{input_json("INPUT0", "FP32", {1, 16}, sixteen), in1},
       "input 'INPUT0' has datatype FP32; model 'simple' expects INT32"},
      {{input_json("INPUT0", "FLOAT", {1, 16}, sixteen), in1}, "input 'INPUT0' has unknown datatype 'FLOAT'"},
      {{input_json("INPUT0", "INT32", {16}, sixteen), in1}, "has shape [16] (rank 1); model 'simple' expects rank 2"},
      {{input_json("INPUT0", "INT32", {2, 8}, sixteen), in1}, "expects [-1,16] (dimension 1 must be 16)"},
      {{input_json("INPUT0", "INT32", {0, 16}, json::array()), in1}, "batch size 0; model 'simple' takes 1 to 8"},
      {{input_json("INPUT0", "INT32", {9, 16}, iota_int32(0, 144)), in1}, "batch size 9; model 'simple' takes 1 to 8"},
      {{input_json("INPUT0", "INT32", {2, 16}, iota_int32(0, 32)), in1}, "inputs disagree on the batch size"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fragment);
    const json request = {{"inputs", c.inputs}};
    expect_protocol_error([&] { (void)parse_infer_request(request.dump(), std::nullopt, model); }, 400, c.fragment);
  }
}

TEST(KserveParse, InputsComeOutInModelOrderWithTheBatchSize) {
  const auto model = simple_model();
  const json request = {{"inputs",
                         {input_json("INPUT1", "INT32", {2, 16}, iota_int32(100, 32)),
                          input_json("INPUT0", "INT32", {2, 16}, iota_int32(0, 32))}}};
  const auto parsed = parse_infer_request(request.dump(), std::nullopt, model);
  ASSERT_EQ(parsed.inputs.size(), 2u);
  EXPECT_EQ(parsed.inputs[0].name, "INPUT0");
  EXPECT_EQ(values_of<std::int32_t>(parsed.inputs[0].data), iota_int32(0, 32));
  EXPECT_EQ(parsed.inputs[1].name, "INPUT1");
  EXPECT_EQ(parsed.batch_size, 2);
}

TEST(KserveParse, ANonBatchingModelTakesItsShapeAsDeclared) {
  ModelMetadata model{"fixed", {"1"}, "custom", {{"x", Datatype::fp32, {2, -1}}}, {{"y", Datatype::fp32, {2}}}, 0};
  const json request = {{"inputs", {input_json("x", "FP32", {2, 3}, {1, 2, 3, 4, 5, 6})}}};
  const auto parsed = parse_infer_request(request.dump(), std::nullopt, model);
  EXPECT_EQ(parsed.batch_size, 1);
  EXPECT_EQ(parsed.inputs[0].shape, (std::vector<std::int64_t>{2, 3}));
  const json wrong = {{"inputs", {input_json("x", "FP32", {3, 2}, {1, 2, 3, 4, 5, 6})}}};
  expect_protocol_error([&] { (void)parse_infer_request(wrong.dump(), std::nullopt, model); }, 400,
                        "(dimension 0 must be 2)");
}

TEST(KserveParse, MalformedStructureIsA400) {
  const auto model = typed_model(Datatype::fp32);
  const json good_input = input_json("x", "FP32", {1, 1}, {1.0});
  struct Case {
    std::string body;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"[]", "must be a JSON object, not an array"},
      {"\"inputs\"", "must be a JSON object, not \"inputs\""},
      {"42", "must be a JSON object, not 42"},
      {"", "not valid JSON"},
      {"{\"inputs\": [", "not valid JSON"},
      {"{}", "the request has no 'inputs'"},
      {R"({"inputs": {}})", "'inputs' must be an array"},
      {R"({"inputs": [5]})", "inputs[0] must be a JSON object"},
      {R"({"inputs": [{"datatype": "FP32", "shape": [1, 1], "data": [1]}]})", "inputs[0] has no 'name'"},
      {R"({"inputs": [{"name": 7, "datatype": "FP32", "shape": [1, 1], "data": [1]}]})",
       "'name' of inputs[0] must be a string, not 7"},
      {R"({"inputs": [{"name": "x", "shape": [1, 1], "data": [1]}]})", "input 'x' has no 'datatype'"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "data": [1]}]})", "input 'x' has no 'shape'"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": "1x1", "data": [1]}]})",
       "'shape' of input 'x' must be an array"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, -1], "data": [1]}]})",
       "must hold non-negative integers, not -1"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1.5], "data": [1]}]})",
       "must hold non-negative integers, not 1.5"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": 1}]})",
       "'data' of input 'x' must be an array"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1]}]})",
       "exactly one of 'data' and parameters.binary_data_size"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1], "parameters": {"binary_data_size": 4}}]})",
       "exactly one of 'data' and parameters.binary_data_size"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1], "parameters": []}]})",
       "'parameters' of input 'x' must be a JSON object"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "parameters": {"shared_memory_region": "r"}}]})",
       "shared-memory extension is not supported"},
      {R"({"id": 5, "inputs": []})", "'id' must be a string, not 5"},
      {R"({"parameters": 1, "inputs": []})", "'parameters' of the request must be a JSON object"},
      {"{\"inputs\": [], \"x\": \"\xff\"}", "not valid JSON"},  // strings must be UTF-8
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    expect_protocol_error([&] { (void)parse_infer_request(c.body, std::nullopt, model); }, 400, c.fragment);
  }
}

TEST(KserveParse, DeepNestingIsRefusedCleanly) {
  const std::string deep = std::string(10'000, '[') + "1" + std::string(10'000, ']');
  const std::string body = R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": )" + deep + "}]}";
  expect_protocol_error([&] { (void)parse_infer_request(body, std::nullopt, typed_model(Datatype::fp32)); }, 400,
                        "nests JSON deeper than 100 levels");
  // Brackets inside strings are not nesting.
  const json in_string = {{"id", std::string(500, '[')}, {"inputs", {input_json("x", "FP32", {1, 1}, {1})}}};
  EXPECT_EQ(parse_infer_request(in_string.dump(), std::nullopt, typed_model(Datatype::fp32)).id, std::string(500, '['));
}

// A body of megabytes of empty arrays costs the parser about 25 times its size in memory (each a
// DOM node with its own vector); it is refused before it is parsed when it holds more values than
// the model's inputs could use.
TEST(KserveParse, MoreJsonValuesThanTheModelTakesAreRefusedBeforeParsing) {
  // simple_model: two inputs of [-1, 16] up to batch 8, each 128 elements in 1 + 8 arrays: at most
  // 2 x (128 + 2 x 9) + 4096 values.
  std::string arrays = "[";
  for (int i = 0; i < 5000; ++i) arrays += i == 0 ? "[]" : ",[]";
  arrays += "]";
  const std::string body =
      R"({"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [8, 16], "data": )" + arrays + "}]}";
  expect_protocol_error([&] { (void)parse_infer_request(body, std::nullopt, simple_model()); }, 400,
                        "model 'simple' takes at most 4388 per request");
  // The most a request of the model can hold goes through (nested rows, both inputs at batch 8).
  std::vector<std::int32_t> values(128, 7);
  json rows = json::array();
  for (int row = 0; row < 8; ++row) rows.push_back(std::vector<std::int32_t>(16, row));
  const json full = {{"inputs",
                      {{{"name", "INPUT0"}, {"datatype", "INT32"}, {"shape", {8, 16}}, {"data", rows}},
                       {{"name", "INPUT1"}, {"datatype", "INT32"}, {"shape", {8, 16}}, {"data", values}}}}};
  EXPECT_EQ(parse_infer_request(full.dump(), std::nullopt, simple_model()).batch_size, 8);
  // Dimensions of 1 nest an array per element: the most a request of such a model can hold, nested
  // to its full shape at its largest batch, goes through (about 192,000 values for 64,000 elements).
  const ModelMetadata unit_dims{"column", {"1"}, "custom", {{"x", Datatype::fp32, {-1, 1000, 1, 1}}},
                                {{"y", Datatype::fp32, {-1, 1}}}, 64};
  json batch = json::array();
  for (int b = 0; b < 64; ++b) {
    json column = json::array();
    for (int r = 0; r < 1000; ++r) column.push_back(json::array({json::array({0.5})}));
    batch.push_back(column);
  }
  const json nested = {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {64, 1000, 1, 1}}, {"data", batch}}}}};
  EXPECT_EQ(parse_infer_request(nested.dump(), std::nullopt, unit_dims).batch_size, 64);
  // A dimension other than the batch that is variable leaves the body's size as the only bound.
  std::string many = "[1";
  for (int i = 1; i < 20000; ++i) many += ",1";
  many += "]";
  const std::string wide = R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 20000], "data": )" + many + "}]}";
  EXPECT_EQ(parse_infer_request(wide, std::nullopt, typed_model(Datatype::fp32)).inputs.front().data.size(), 80000U);
}

TEST(KserveParse, ANumberBeyondADoubleIsA400) {
  const std::string body = R"({"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 1], "data": [1e999]}]})";
  expect_protocol_error([&] { (void)parse_infer_request(body, std::nullopt, typed_model(Datatype::fp64)); }, 400,
                        "number overflow");
}

// --- Binary requests (extension_binary_data.md) ---

TEST(KserveParse, BinaryImageRoundTripsByteForByte) {
  const auto model = image_model();
  std::vector<float> pixels(3 * 224 * 224);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i % 251) / 251.0f - 0.5f;
  const json header = {{"inputs", {binary_input_json("INPUT__0", "FP32", {1, 3, 224, 224}, pixels.size() * 4)}},
                       {"outputs", {{{"name", "OUTPUT__0"}, {"parameters", {{"binary_data", true}}}}}}};
  const auto header_text = header.dump();
  const auto body = header_text + raw(pixels);
  const auto parsed = parse_infer_request(body, header_text.size(), model);
  ASSERT_EQ(parsed.inputs.size(), 1u);
  EXPECT_EQ(parsed.inputs[0].shape, (std::vector<std::int64_t>{1, 3, 224, 224}));
  EXPECT_EQ(parsed.inputs[0].data, bytes_of(pixels));
  ASSERT_EQ(parsed.outputs.size(), 1u);
  EXPECT_TRUE(parsed.outputs[0].binary_data);
}

TEST(KserveParse, BinaryChunksFollowTheJsonOrderAndMixWithJsonInputs) {
  const auto model = simple_model();
  const auto a = iota_int32(0, 16);
  const auto b = iota_int32(500, 16);
  // Binary chunks in JSON order: INPUT1's bytes first. INPUT0 is JSON.
  const json header = {
      {"inputs", {binary_input_json("INPUT1", "INT32", {1, 16}, 64), input_json("INPUT0", "INT32", {1, 16}, a)}}};
  const auto header_text = header.dump();
  const auto parsed = parse_infer_request(header_text + raw(b), header_text.size(), model);
  EXPECT_EQ(values_of<std::int32_t>(parsed.inputs[0].data), a);
  EXPECT_EQ(values_of<std::int32_t>(parsed.inputs[1].data), b);

  const json both_binary = {
      {"inputs",
       {binary_input_json("INPUT1", "INT32", {1, 16}, 64), binary_input_json("INPUT0", "INT32", {1, 16}, 64)}}};
  const auto both_text = both_binary.dump();
  const auto parsed_both = parse_infer_request(both_text + raw(b) + raw(a), both_text.size(), model);
  EXPECT_EQ(values_of<std::int32_t>(parsed_both.inputs[0].data), a);
  EXPECT_EQ(values_of<std::int32_t>(parsed_both.inputs[1].data), b);
}

TEST(KserveParse, BinaryBytesTensorsUseLengthPrefixes) {
  const auto model = typed_model(Datatype::bytes);
  const std::vector<std::string> strings = {"hello", "", std::string("\0\xff\x01", 3)};
  const auto data = raw_bytes_tensor(strings);
  ASSERT_EQ(data.size(), 3 * 4 + 5 + 0 + 3);
  EXPECT_EQ(data.substr(0, 4), std::string("\x05\0\0\0", 4));  // little-endian length 5
  const json header = {{"inputs", {binary_input_json("x", "BYTES", {1, 3}, data.size())}}};
  const auto text = header.dump();
  const auto parsed = parse_infer_request(text + data, text.size(), model);
  const auto elements = bytes_elements(parsed.inputs[0].data);
  ASSERT_EQ(elements.size(), 3u);
  EXPECT_EQ(elements[0], "hello");
  EXPECT_EQ(elements[1], "");
  EXPECT_EQ(elements[2], strings[2]);

  const json too_many = {{"inputs", {binary_input_json("x", "BYTES", {1, 4}, data.size())}}};
  expect_protocol_error([&] { (void)parse_infer_request(too_many.dump() + data, too_many.dump().size(), model); }, 400,
                        "BYTES input 'x' has shape [1,4] (4 elements) but its binary data holds 3");
  const std::string truncated = std::string("\x09\0\0\0abc", 7);  // claims 9 bytes, has 3
  const json bad_prefix = {{"inputs", {binary_input_json("x", "BYTES", {1, 1}, truncated.size())}}};
  expect_protocol_error(
      [&] { (void)parse_infer_request(bad_prefix.dump() + truncated, bad_prefix.dump().size(), model); }, 400,
      "input 'x': BYTES data of 7 bytes has a length prefix that runs past its end");
}

TEST(KserveParse, BinaryFramingErrorsAreA400) {
  const auto model = typed_model(Datatype::fp32);
  const std::vector<float> four = {1, 2, 3, 4};
  const json header = {{"inputs", {binary_input_json("x", "FP32", {1, 4}, 16)}}};
  const auto text = header.dump();
  const auto body = text + raw(four);
  ASSERT_NO_THROW((void)parse_infer_request(body, text.size(), model));

  expect_protocol_error([&] { (void)parse_infer_request(body, body.size() + 1, model); }, 400,
                        "is larger than the body");
  expect_protocol_error([&] { (void)parse_infer_request(body, text.size() - 5, model); }, 400,
                        "(Inference-Header-Content-Length) are not valid JSON");
  // Without the header the binary bytes are read as JSON; nlohmann would stop at the NUL byte.
  expect_protocol_error([&] { (void)parse_infer_request(body, std::nullopt, model); }, 400,
                        "not valid JSON: a NUL byte at offset");
  expect_protocol_error([&] { (void)parse_infer_request(body, std::nullopt, model); }, 400,
                        "binary tensor data needs the Inference-Header-Content-Length header");
  const json plain = {{"inputs", {input_json("x", "FP32", {1, 1}, {1})}}};
  expect_protocol_error(
      [&] { (void)parse_infer_request(plain.dump() + std::string("\0junk", 5), std::nullopt, model); }, 400,
      "a NUL byte at offset");
  expect_protocol_error([&] { (void)parse_infer_request(body + "xx", text.size(), model); }, 400,
                        "18 bytes follow the JSON header but the inputs' binary_data_size values add up to 16");
  expect_protocol_error([&] { (void)parse_infer_request(body.substr(0, body.size() - 4), text.size(), model); }, 400,
                        "declares binary_data_size 16 but only 12 bytes follow the JSON header");
  expect_protocol_error([&] { (void)parse_infer_request(text, std::nullopt, model); }, 400,
                        "binary data needs the Inference-Header-Content-Length header");

  const json odd = {{"inputs", {binary_input_json("x", "FP32", {1, 4}, 15)}}};
  expect_protocol_error(
      [&] { (void)parse_infer_request(odd.dump() + raw(four).substr(0, 15), odd.dump().size(), model); }, 400,
      "binary_data_size 15 of input 'x' is not a multiple of the FP32 element size (4 bytes)");
  const json wrong_count = {{"inputs", {binary_input_json("x", "FP32", {1, 3}, 16)}}};
  expect_protocol_error(
      [&] { (void)parse_infer_request(wrong_count.dump() + raw(four), wrong_count.dump().size(), model); }, 400,
      "has shape [1,3] (3 elements) but binary_data_size 16 holds 4 FP32 elements");
  for (const json& size : {json(-4), json("16"), json(16.5)}) {
    const json bad = {
        {"inputs",
         {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 4}}, {"parameters", {{"binary_data_size", size}}}}}}};
    expect_protocol_error([&] { (void)parse_infer_request(bad.dump() + raw(four), bad.dump().size(), model); }, 400,
                          "binary_data_size of input 'x' must be a non-negative integer");
  }
  const json bools = {{"inputs", {binary_input_json("x", "BOOL", {1, 3}, 3)}}};
  expect_protocol_error(
      [&] {
        (void)parse_infer_request(bools.dump() + std::string("\x01\x00\x02", 3), bools.dump().size(),
                                  typed_model(Datatype::boolean));
      },
      400, "BOOL input 'x' element 2 is byte 2; BOOL elements are 0 or 1");
}

// Whatever the bytes, the parser either accepts or throws ProtocolError(400): every truncation
// and a few thousand seeded byte mutations of a valid mixed request, with each header length.
TEST(KserveParse, TruncatedAndMutatedBodiesOnlyEverThrowProtocolErrors) {
  const auto model = simple_model();
  const json header = {{"id", "r"},
                       {"parameters", {{"priority", 1}}},
                       {"inputs",
                        {binary_input_json("INPUT0", "INT32", {1, 16}, 64),
                         input_json("INPUT1", "INT32", {1, 16}, json::array({iota_int32(0, 16)}))}},
                       {"outputs", {{{"name", "OUTPUT0"}, {"parameters", {{"binary_data", true}}}}}}};
  const auto text = header.dump();
  const auto body = text + raw(iota_int32(7, 16));
  int accepted = 0;
  int refused = 0;
  const auto attempt = [&](const std::string& candidate, std::optional<std::size_t> header_length) {
    try {
      (void)parse_infer_request(candidate, header_length, model);
      ++accepted;
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.http_status(), 400) << e.what();
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "escaped as another exception: " << e.what();
    }
  };
  for (std::size_t length = 0; length <= body.size(); ++length) {
    const auto prefix = body.substr(0, length);
    attempt(prefix, std::nullopt);
    attempt(prefix, std::min(text.size(), length));
  }
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;  // xorshift: reproducible without <random>'s distributions
  const auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int round = 0; round < 3000; ++round) {
    auto mutated = body;
    const int flips = 1 + static_cast<int>(next() % 3);
    for (int f = 0; f < flips; ++f) {
      mutated[next() % mutated.size()] = static_cast<char>(next() & 0xff);
    }
    attempt(mutated, text.size());
    attempt(mutated, std::nullopt);
    attempt(mutated, next() % (mutated.size() + 1));
  }
  EXPECT_GT(accepted, 0);  // the unmutated body and mutations of the binary data still parse
  EXPECT_GT(refused, 1000);
}

TEST(KserveParse, HeaderLengthValues) {
  EXPECT_EQ(parse_header_length("123"), 123u);
  EXPECT_EQ(parse_header_length(" 42\t"), 42u);
  EXPECT_EQ(parse_header_length("0"), 0u);
  for (const char* bad : {"", "-1", "abc", "12x", "1 2", "99999999999999999999999", "+5"}) {
    expect_protocol_error([&] { (void)parse_header_length(bad); }, 400,
                          "Inference-Header-Content-Length must be a byte count");
  }
}

TEST(KserveParse, RawBinaryRequestDeducesTheVariableDimension) {
  // Inference-Header-Content-Length: 0 — the body is the single input's data, batch 1.
  ModelMetadata model{
      "audio", {"1"}, "custom", {{"wave", Datatype::fp32, {-1, 2, -1}}}, {{"y", Datatype::fp32, {-1, 1}}}, 8};
  const std::vector<float> samples = {1, 2, 3, 4, 5, 6};
  const auto parsed = parse_infer_request(raw(samples), std::size_t{0}, model);
  ASSERT_EQ(parsed.inputs.size(), 1u);
  EXPECT_EQ(parsed.inputs[0].shape, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(parsed.inputs[0].data, bytes_of(samples));
  EXPECT_TRUE(parsed.binary_data_output);
  EXPECT_EQ(parsed.batch_size, 1);
  expect_protocol_error([&] { (void)parse_infer_request(raw(samples).substr(0, 20), std::size_t{0}, model); }, 400,
                        "a raw binary body of 20 bytes is not a multiple of 8 bytes");
  expect_protocol_error([&] { (void)parse_infer_request(raw(samples), std::size_t{0}, simple_model()); }, 400,
                        "needs a model with one input; model 'simple' has 2");
  ModelMetadata two_variable{
      "image", {"1"}, "custom", {{"x", Datatype::uint8, {-1, -1, -1}}}, {{"y", Datatype::fp32, {-1, 1}}}, 8};
  expect_protocol_error([&] { (void)parse_infer_request(raw(samples), std::size_t{0}, two_variable); }, 400,
                        "needs at most one variable dimension; model 'image' declares [-1,-1,-1]");
  // A BYTES input goes raw as one element, shape [1] after the batch dimension.
  ModelMetadata text{"text", {"1"}, "custom", {{"s", Datatype::bytes, {-1, 1}}}, {{"y", Datatype::fp32, {-1, 1}}}, 8};
  const auto one_string = parse_infer_request(raw_bytes_tensor({"hi"}), std::size_t{0}, text);
  EXPECT_EQ(one_string.inputs[0].shape, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(bytes_elements(one_string.inputs[0].data), (std::vector<std::string_view>{"hi"}));
}

// --- Request parameters: schedule policy, binary outputs, reserved keys ---

TEST(KserveParse, SchedulePolicyAndOutputParameters) {
  const auto model = simple_model();
  const auto sixteen = iota_int32(0, 16);
  json request = {
      {"id", "req-7"},
      {"parameters", {{"priority", 2}, {"timeout", 1500}, {"binary_data_output", true}, {"my_knob", 42}}},
      {"inputs", {input_json("INPUT0", "INT32", {1, 16}, sixteen), input_json("INPUT1", "INT32", {1, 16}, sixteen)}},
      {"outputs", {{{"name", "OUTPUT1"}, {"parameters", {{"binary_data", false}}}}, {{"name", "OUTPUT0"}}}}};
  const auto parsed = parse_infer_request(request.dump(), std::nullopt, model);
  EXPECT_EQ(parsed.id, "req-7");
  EXPECT_EQ(parsed.priority, 2);
  EXPECT_EQ(parsed.timeout_us, 1500u);
  EXPECT_TRUE(parsed.binary_data_output);
  ASSERT_EQ(parsed.outputs.size(), 2u);
  EXPECT_EQ(parsed.outputs[0].name, "OUTPUT1");
  EXPECT_FALSE(parsed.outputs[0].binary_data);  // its own binary_data overrides binary_data_output
  EXPECT_EQ(parsed.outputs[1].name, "OUTPUT0");
  EXPECT_TRUE(parsed.outputs[1].binary_data);  // inherits binary_data_output

  // 0 means "the default", as no parameter; the C++ client's "id": "" is accepted.
  request["id"] = "";
  request["parameters"] = {{"priority", 0}, {"timeout", 0}};
  const auto defaults = parse_infer_request(request.dump(), std::nullopt, model);
  EXPECT_EQ(defaults.id, "");
  EXPECT_FALSE(defaults.priority);
  EXPECT_FALSE(defaults.timeout_us);
  EXPECT_FALSE(defaults.binary_data_output);

  struct Case {
    json parameters;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{{"priority", -1}}, "parameters.priority must be a non-negative integer, not -1"},
      {{{"priority", "high"}}, "parameters.priority must be a non-negative integer"},
      {{{"timeout", 1.5}}, "parameters.timeout must be a non-negative integer of microseconds, not 1.5"},
      {{{"binary_data_output", 1}}, "parameters.binary_data_output must be true or false, not 1"},
      {{{"triton_enable_empty_final_response", true}}, "keys starting with 'triton_' are reserved"},
      {{{"sequence_id", 5}}, "sequences (parameters.sequence_id) are not supported"},
      {{{"sequence_start", true}}, "sequences (parameters.sequence_start) are not supported"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.parameters.dump());
    request["parameters"] = c.parameters;
    expect_protocol_error([&] { (void)parse_infer_request(request.dump(), std::nullopt, model); }, 400, c.fragment);
  }
}

TEST(KserveParse, RequestedOutputsAreChecked) {
  const auto model = simple_model();
  const auto sixteen = iota_int32(0, 16);
  json request = {
      {"inputs", {input_json("INPUT0", "INT32", {1, 16}, sixteen), input_json("INPUT1", "INT32", {1, 16}, sixteen)}}};
  struct Case {
    json outputs;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{{{"name", "PROB"}}}, "unknown output 'PROB' for model 'simple' (its outputs: OUTPUT0, OUTPUT1)"},
      {{{{"name", "OUTPUT0"}}, {{"name", "OUTPUT0"}}}, "output 'OUTPUT0' is requested twice"},
      {{{{"name", "OUTPUT0"}, {"parameters", {{"binary_data", "yes"}}}}},
       "parameters.binary_data of output 'OUTPUT0' must be true or false"},
      {{{{"name", "OUTPUT0"}, {"parameters", {{"classification", -1}}}}},
       "parameters.classification of output 'OUTPUT0' must be a count of classes from 0 to 4294967295, not -1"},
      {{{{"name", "OUTPUT0"}, {"parameters", {{"classification", 4294967296ULL}}}}}, "not 4294967296"},
      {{{{"name", "OUTPUT0"}, {"parameters", {{"classification", "3"}}}}}, "not \"3\""},
      {{{{"name", "OUTPUT0"}, {"parameters", {{"classification", 2.5}}}}}, "not 2.5"},
      {{{{"name", "OUTPUT0"}, {"parameters", {{"shared_memory_region", "r"}}}}},
       "shared-memory extension is not supported"},
      {{{{"parameters", json::object()}}}, "outputs[0] has no 'name'"},
      {json::object(), "'outputs' must be an array"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.outputs.dump());
    request["outputs"] = c.outputs;
    expect_protocol_error([&] { (void)parse_infer_request(request.dump(), std::nullopt, model); }, 400, c.fragment);
  }
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
