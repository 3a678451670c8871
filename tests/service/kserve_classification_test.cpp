// Triton's classification extension: classify_output on its own (the worked example of Triton's
// docs/protocol/extension_classification.md, every datatype, batches, ties, NaN, the refusals),
// and a request parsed and answered as tritonclient.http asks for classes and reads them.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpucap/service/kserve_protocol.hpp"

namespace gpucap::service::kserve {
namespace {

using nlohmann::json;

template <typename T>
Tensor tensor_of(Datatype datatype, std::vector<std::int64_t> shape, const std::vector<T>& values) {
  Tensor tensor{"scores", datatype, std::move(shape), std::vector<std::byte>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  return tensor;
}

std::vector<std::string> strings_of(const Tensor& tensor) {
  EXPECT_EQ(tensor.datatype, Datatype::bytes);
  std::vector<std::string> out;
  for (const auto element : bytes_elements(tensor.data)) out.emplace_back(element);
  return out;
}

int status_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const ProtocolError& e) {
    return e.http_status();
  }
  return 200;
}

TEST(KserveClassification, TritonsWorkedExample) {
  // The document's example: the output [1.1, 3.3, 0.5, 2.4] with classification 2 gives
  // ["3.3:1", "2.4:3"]; Triton's server writes the value with std::to_string.
  const auto classes = classify_output(tensor_of<float>(Datatype::fp32, {4}, {1.1f, 3.3f, 0.5f, 2.4f}), 2, false);
  EXPECT_EQ(classes.name, "scores");
  EXPECT_EQ(classes.shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(strings_of(classes), (std::vector<std::string>{"3.300000:1", "2.400000:3"}));
}

TEST(KserveClassification, EachBatchItemIsClassifiedOnItsOwn) {
  // Two items of [2, 3] elements each: an item's index runs over all its elements, row-major.
  const auto batched = tensor_of<float>(Datatype::fp32, {2, 2, 3}, {0, 5, 1, 2, 9, 3, /**/ 7, 0, 0, 8, 0, 6});
  const auto classes = classify_output(batched, 2, true);
  EXPECT_EQ(classes.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(strings_of(classes), (std::vector<std::string>{"9.000000:4", "5.000000:1", "8.000000:3", "7.000000:0"}));
  // The same tensor for a model that does not batch is one item of 12 elements.
  EXPECT_EQ(strings_of(classify_output(batched, 2, false)), (std::vector<std::string>{"9.000000:4", "8.000000:9"}));
}

TEST(KserveClassification, TheCountIsCutToTheElementsOfAnItem) {
  const auto classes = classify_output(tensor_of<double>(Datatype::fp64, {1, 3}, {0.25, 1.0, 0.5}), 1000, true);
  EXPECT_EQ(classes.shape, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(strings_of(classes), (std::vector<std::string>{"1.000000:1", "0.500000:2", "0.250000:0"}));
}

TEST(KserveClassification, IntegersAreWrittenAsNumbers) {
  EXPECT_EQ(strings_of(classify_output(tensor_of<std::int8_t>(Datatype::int8, {1, 3}, {-5, -1, -120}), 3, true)),
            (std::vector<std::string>{"-1:1", "-5:0", "-120:2"}));
  EXPECT_EQ(strings_of(classify_output(tensor_of<std::uint8_t>(Datatype::uint8, {1, 2}, {65, 200}), 2, true)),
            (std::vector<std::string>{"200:1", "65:0"}));
  EXPECT_EQ(strings_of(classify_output(
                tensor_of<std::int64_t>(Datatype::int64, {2}, {std::numeric_limits<std::int64_t>::min(), 7}), 1, false)),
            (std::vector<std::string>{"7:1"}));
  EXPECT_EQ(strings_of(classify_output(tensor_of<std::uint64_t>(Datatype::uint64, {1, 2},
                                                                {1, std::numeric_limits<std::uint64_t>::max()}),
                                       1, true)),
            (std::vector<std::string>{"18446744073709551615:1"}));
  for (const auto datatype : {Datatype::uint16, Datatype::int16}) {
    const auto classes = classify_output(tensor_of<std::uint16_t>(datatype, {1, 2}, {3, 4}), 1, true);
    EXPECT_EQ(strings_of(classes), (std::vector<std::string>{"4:1"})) << to_string(datatype);
  }
  for (const auto datatype : {Datatype::uint32, Datatype::int32}) {
    const auto classes = classify_output(tensor_of<std::uint32_t>(datatype, {1, 2}, {9, 4}), 1, true);
    EXPECT_EQ(strings_of(classes), (std::vector<std::string>{"9:0"})) << to_string(datatype);
  }
}

TEST(KserveClassification, EqualValuesGoByIndexAndNanComesLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto classes =
      classify_output(tensor_of<float>(Datatype::fp32, {1, 6}, {nan, 2.0f, -INFINITY, 2.0f, nan, INFINITY}), 6, true);
  const auto text = strings_of(classes);
  ASSERT_EQ(text.size(), 6u);
  EXPECT_EQ(text[0], "inf:5");
  EXPECT_EQ(text[1], "2.000000:1");
  EXPECT_EQ(text[2], "2.000000:3");
  EXPECT_EQ(text[3], "-inf:2");
  EXPECT_TRUE(text[4].ends_with("nan:0")) << text[4];
  EXPECT_TRUE(text[5].ends_with("nan:4")) << text[5];
}

TEST(KserveClassification, WhatCannotBeClassifiedIsA400) {
  for (const auto datatype : {Datatype::boolean, Datatype::fp16, Datatype::bf16}) {
    EXPECT_FALSE(classifiable(datatype));
    EXPECT_EQ(status_of([&] { (void)classify_output(tensor_of<std::uint16_t>(datatype, {1, 1}, {1}), 1, true); }), 400)
        << to_string(datatype);
  }
  EXPECT_FALSE(classifiable(Datatype::bytes));
  try {
    (void)classify_output(tensor_of<std::uint16_t>(Datatype::fp16, {1, 1}, {1}), 1, true);
    ADD_FAILURE() << "an FP16 output was classified";
  } catch (const ProtocolError& e) {
    EXPECT_STREQ(e.what(), "class result not available for output 'scores' due to unsupported type 'FP16'");
  }
  // Classes beyond the answer's bound (kMaxClassificationBytes by default): three items of two
  // classes "9.000000:1" (4 + 10 bytes each) take 84 bytes.
  const auto three = tensor_of<float>(Datatype::fp32, {3, 2}, {1, 9, 1, 9, 1, 9});
  EXPECT_EQ(classify_output(three, 2, true, 84).data.size(), 84u);
  EXPECT_EQ(status_of([&] { (void)classify_output(three, 2, true, 83); }), 400);
  // More than a million elements in an item (Triton's bound); a million in each of two items is fine.
  const std::vector<std::uint8_t> many(2'000'001, 1);
  EXPECT_EQ(status_of([&] { (void)classify_output(tensor_of(Datatype::uint8, {1, 2'000'001}, many), 5, true); }), 400);
  const std::vector<std::uint8_t> two_items(2'000'000, 1);
  EXPECT_EQ(classify_output(tensor_of(Datatype::uint8, {2, 1'000'000}, two_items), 5, true).shape,
            (std::vector<std::int64_t>{2, 5}));
  // An output whose bytes do not match its shape is the server's fault.
  EXPECT_EQ(status_of([&] { (void)classify_output(tensor_of<float>(Datatype::fp32, {1, 3}, {1, 2}), 1, true); }), 500);
}

// The model of Triton's image example: FP32 [-1, 3, 2, 2] in, FP32 [-1, 5] and INT8 flags out.
ModelMetadata scoring_model() {
  return {"scorer",
          {"1"},
          "custom",
          {{"image", Datatype::fp32, {-1, 3, 2, 2}}},
          {{"probabilities", Datatype::fp32, {-1, 5}},
           {"flags", Datatype::boolean, {-1, 1}},
           {"ranks", Datatype::int32, {-1, 3}}},
          8};
}

json image_input(int batch) {
  return {{"name", "image"}, {"datatype", "FP32"}, {"shape", {batch, 3, 2, 2}}, {"data", std::vector<float>(static_cast<std::size_t>(batch) * 12, 0.f)}};
}

TEST(KserveClassification, ARequestAsTritonclientSendsItAndItsAnswerAsItReadsIt) {
  const auto model = scoring_model();
  // InferRequestedOutput("probabilities", binary_data=True, class_count=3).
  const json request_json = {
      {"inputs", {image_input(2)}},
      {"outputs", {{{"name", "probabilities"}, {"parameters", {{"binary_data", true}, {"classification", 3}}}}}}};
  const auto request = parse_infer_request(request_json.dump(), std::nullopt, model);
  ASSERT_EQ(request.outputs.size(), 1u);
  EXPECT_EQ(request.outputs[0].class_count, 3u);
  EXPECT_TRUE(request.model_batches);

  InferResponse named{
      "scorer",
      "1",
      "",
      {tensor_of<float>(Datatype::fp32, {2, 5}, {0.1f, 0.6f, 0.05f, 0.2f, 0.05f, /**/ 0.3f, 0.1f, 0.1f, 0.1f, 0.4f}),
       tensor_of<std::uint8_t>(Datatype::boolean, {2, 1}, {1, 0}),
       tensor_of<std::int32_t>(Datatype::int32, {2, 3}, {3, 1, 2, /**/ -4, -6, -5})}};
  named.outputs[0].name = "probabilities";
  named.outputs[1].name = "flags";
  named.outputs[2].name = "ranks";
  const auto encoded = encode_infer_response(named, request);
  ASSERT_TRUE(encoded.header_length);
  const auto header = json::parse(encoded.body.substr(0, *encoded.header_length));
  ASSERT_EQ(header["outputs"].size(), 1u);
  EXPECT_EQ(header["outputs"][0]["datatype"], "BYTES");
  EXPECT_EQ(header["outputs"][0]["shape"], json({2, 3}));
  // tritonclient.http's as_numpy on a binary BYTES output: 4-byte length, then the bytes, per element.
  const auto binary = encoded.body.substr(*encoded.header_length);
  EXPECT_EQ(header["outputs"][0]["parameters"]["binary_data_size"], binary.size());
  std::vector<std::string> elements;
  for (std::size_t at = 0; at + 4 <= binary.size();) {
    std::uint32_t length = 0;
    std::memcpy(&length, binary.data() + at, 4);
    elements.push_back(binary.substr(at + 4, length));
    at += 4 + length;
  }
  EXPECT_EQ(elements, (std::vector<std::string>{"0.600000:1", "0.200000:3", "0.100000:0", "0.400000:4", "0.300000:0",
                                                 "0.100000:1"}));

  // As JSON (binary_data false), the same strings; class_count 0 asks for the tensor itself.
  json as_json = request_json;
  as_json["outputs"] = {{{"name", "probabilities"}, {"parameters", {{"binary_data", false}, {"classification", 1}}}},
                        {{"name", "flags"}, {"parameters", {{"classification", 0}}}}};
  const auto json_answer =
      json::parse(encode_infer_response(named, parse_infer_request(as_json.dump(), std::nullopt, model)).body);
  EXPECT_EQ(json_answer["outputs"][0]["data"], json({"0.600000:1", "0.400000:4"}));
  EXPECT_EQ(json_answer["outputs"][1]["datatype"], "BOOL");
  EXPECT_EQ(json_answer["outputs"][1]["data"], json({true, false}));

  // Two outputs classified in one answer, the second as binary: each keeps its own classes.
  json two = request_json;
  two["outputs"] = {{{"name", "ranks"}, {"parameters", {{"classification", 2}, {"binary_data", false}}}},
                    {{"name", "probabilities"}, {"parameters", {{"classification", 1}, {"binary_data", true}}}}};
  const auto both = encode_infer_response(named, parse_infer_request(two.dump(), std::nullopt, model));
  ASSERT_TRUE(both.header_length);
  const auto both_header = json::parse(both.body.substr(0, *both.header_length));
  EXPECT_EQ(both_header["outputs"][0]["name"], "ranks");
  EXPECT_EQ(both_header["outputs"][0]["data"], json({"3:0", "2:2", "-4:0", "-5:2"}));
  EXPECT_EQ(both_header["outputs"][1]["name"], "probabilities");
  EXPECT_EQ(both_header["outputs"][1]["shape"], json({2, 1}));
  std::string expected_binary;
  for (const std::string element : {"0.600000:1", "0.400000:4"}) {
    const auto length = static_cast<std::uint32_t>(element.size());
    expected_binary.append(reinterpret_cast<const char*>(&length), 4);
    expected_binary += element;
  }
  EXPECT_EQ(both.body.substr(*both.header_length), expected_binary);

  // A BOOL output cannot be classified: refused with the request, before any batch runs.
  json bool_classes = request_json;
  bool_classes["outputs"] = {{{"name", "flags"}, {"parameters", {{"classification", 1}}}}};
  try {
    (void)parse_infer_request(bool_classes.dump(), std::nullopt, model);
    ADD_FAILURE() << "a BOOL output was accepted for classification";
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_STREQ(e.what(), "class result not available for output 'flags' due to unsupported type 'BOOL'");
  }
}

}  // namespace
}  // namespace gpucap::service::kserve
