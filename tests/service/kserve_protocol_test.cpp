// The KServe v2 codec's datatypes and its JSON requests, against what Triton's clients send
// (tritonclient.http and the C++ client under perf_analyzer) and every malformed body we could think
// of: each refusal is a ProtocolError with status 400 and a message naming the problem. Binary
// requests: kserve_binary_test.cpp; responses, metadata and batching: kserve_response_test.cpp.

#include "gpucap/service/kserve_protocol.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "service/kserve_codec_support.hpp"

namespace gpucap::service::kserve {
namespace {

using namespace codec_test;  // the codec tests' shared helpers (kserve_codec_support.hpp)

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

}  // namespace
}  // namespace gpucap::service::kserve
