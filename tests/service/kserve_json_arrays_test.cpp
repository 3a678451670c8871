// Long flat arrays of numbers in a request's JSON are read by the pre-scan itself
// (kserve_json_guard: JSON's number grammar, std::from_chars) rather than by nlohmann's lexer and
// strtod, about four times faster for an image as JSON numbers: the same tensors and the same
// refusals as the parser's reading, which rows shorter than kMinFastArrayValues still get.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "gpucap/service/kserve_protocol.hpp"
#include "service/kserve_codec_support.hpp"

namespace gpucap::service::kserve {
namespace {

constexpr int kRows = 2;
constexpr int kColumns = 150;  // a row alone is under the pre-scan's 256; the flat array is over

using codec_test::typed_model;
using codec_test::values_of;

// kRows x kColumns tokens, the given ones first, then `filler`.
std::vector<std::string> filled(std::vector<std::string> tokens, const std::string& filler = "0.25") {
  while (tokens.size() < static_cast<std::size_t>(kRows * kColumns)) tokens.push_back(filler);
  return tokens;
}

std::string join(const std::vector<std::string>& tokens, std::size_t from, std::size_t count) {
  std::string out = "[";
  for (std::size_t i = from; i < from + count; ++i) out += (i > from ? ", " : "") + tokens[i];
  return out + "]";
}

std::string request(const std::string& datatype, const std::string& data, const std::string& tail = "") {
  return R"({"inputs": [{"name": "x", "datatype": ")" + datatype + R"(", "shape": [)" + std::to_string(kRows) + ", " +
         std::to_string(kColumns) + R"(], "data": )" + data + "}]" + tail + "}";
}

// The data as one flat array (read by the pre-scan) and as kRows rows (read by the parser).
std::string flat(const std::string& datatype, const std::vector<std::string>& tokens, const std::string& tail = "") {
  return request(datatype, join(tokens, 0, tokens.size()), tail);
}
std::string nested(const std::string& datatype, const std::vector<std::string>& tokens, const std::string& tail = "") {
  std::string rows = "[";
  for (int r = 0; r < kRows; ++r) rows += (r > 0 ? ", " : "") + join(tokens, static_cast<std::size_t>(r * kColumns), kColumns);
  return request(datatype, rows + "]", tail);
}

struct Outcome {
  bool accepted = false;
  std::vector<std::byte> data;
  std::string refusal;
};

Outcome parse(const std::string& body, Datatype datatype) {
  Outcome outcome;
  try {
    auto r = parse_infer_request(body, std::nullopt, typed_model(datatype));
    outcome.accepted = true;
    outcome.data = std::move(r.inputs.at(0).data);
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.http_status(), 400) << e.what();
    outcome.refusal = e.what();
  }
  return outcome;
}

// nlohmann's own refusal of `body` as the server words it, or "" when the body is valid JSON.
std::string parser_refusal(const std::string& body) {
  try {
    const auto document = nlohmann::json::parse(body);
    return document.is_discarded() ? "discarded" : "";
  } catch (const nlohmann::json::exception& e) {
    return std::string("the request body is not valid JSON: ") + e.what();
  }
}

void expect_same_either_way(const std::string& datatype_name, Datatype datatype, const std::vector<std::string>& tokens) {
  const auto fast = parse(flat(datatype_name, tokens), datatype);
  const auto parser = parse(nested(datatype_name, tokens), datatype);
  EXPECT_EQ(fast.accepted, parser.accepted) << fast.refusal << " | " << parser.refusal;
  EXPECT_TRUE(fast.data == parser.data) << datatype_name << ": the tensors differ";
  EXPECT_EQ(fast.refusal, parser.refusal);
}

// Numbers at the edges of each reading: the sign of zero (nlohmann reads "-0" as the integer 0),
// integers past 64 bits (then doubles), exponents, a float's and a double's range and subnormals.
const std::vector<std::string> kEdgeNumbers = {
    "0", "-0", "-0.0", "0.0", "1", "-1", "3.14159", "1e3", "1E-3", "-2.5e+2", "0.1", "1e0",
    "123456789012345678901234567890", "18446744073709551615", "18446744073709551616", "-9223372036854775808",
    "-9223372036854775809", "9007199254740993", "3.4028235e38", "3.4028236e38", "1e-40", "1.17549435e-38",
    "4.9e-324", "2.2250738585072014e-308", "0.30000000000000004", "1.7976931348623157e308", "-1e-7",
    "  5", "6  "};

TEST(KserveJsonArrays, FloatDataReadsAsTheParserReadsIt) {
  expect_same_either_way("FP64", Datatype::fp64, filled(kEdgeNumbers));
  expect_same_either_way("FP32", Datatype::fp32, filled({"0", "-0", "-0.0", "1e3", "0.1", "3.4028235e38", "1e-40",
                                                         "18446744073709551616", "-9223372036854775809", "4.9e-324"}));
  const auto r = parse(flat("FP32", filled({"-0", "-0.0", "2", "1e3"})), Datatype::fp32);
  ASSERT_TRUE(r.accepted) << r.refusal;
  const auto values = values_of<float>(r.data);
  EXPECT_FALSE(std::signbit(values[0])) << "\"-0\" is the integer 0, as nlohmann reads it";
  EXPECT_TRUE(std::signbit(values[1]));
  EXPECT_EQ(values[2], 2.0F);
  EXPECT_EQ(values[3], 1000.0F);
  EXPECT_EQ(values[4], 0.25F);
}

TEST(KserveJsonArrays, IntegerDataIsRefusedAsTheParserRefusesIt) {
  expect_same_either_way("INT64", Datatype::int64, filled({"0", "-0", "9223372036854775807", "-9223372036854775808"}, "7"));
  auto tokens = filled({"1", "2"}, "7");
  tokens[200] = "2.0";  // an integer input takes integers only, as Triton's
  expect_same_either_way("INT32", Datatype::int32, tokens);
  EXPECT_NE(parse(flat("INT32", tokens), Datatype::int32).refusal.find("element 200: 2.0 is not an integer"),
            std::string::npos);
  tokens[200] = "9223372036854775808";  // past int64: a double
  expect_same_either_way("INT64", Datatype::int64, tokens);
  tokens[200] = "-1";
  expect_same_either_way("UINT8", Datatype::uint8, tokens);
  tokens[200] = "1e2";
  expect_same_either_way("UINT8", Datatype::uint8, tokens);
}

// A number beyond a double's range, or one JSON's grammar refuses, is the parser's refusal, word
// for word (its positions in the text the client sent).
TEST(KserveJsonArrays, WhatTheParserRefusesItRefusesWithItsOwnMessage) {
  auto tokens = filled({});
  tokens[260] = "1e999";
  expect_same_either_way("FP64", Datatype::fp64, tokens);
  // A bad token in an array of its own, after the data's flat array (which the pre-scan reads):
  // the refusal is the parser's for the text as sent.
  for (const std::string bad : {"01", "1.", ".5", "+1", "1e", "-", "1e+", "0x10", "1,,2", "1 2", "1e999"}) {
    const auto body = flat("FP64", filled({}), R"(, "parameters": {"p": [)" + bad + "]}");
    const auto expected = parser_refusal(body);
    EXPECT_FALSE(expected.empty()) << bad;
    EXPECT_EQ(parse(body, Datatype::fp64).refusal, expected) << bad;
  }
  // Inside the data's array it is no array of numbers alone: the parser's reading, flat or nested.
  for (const std::string bad : {"01", "1.", "+1", "true", "\"3\""}) {
    tokens = filled({});
    tokens[270] = bad;
    const auto body = flat("FP64", tokens);
    const auto expected = parser_refusal(body);
    if (expected.empty()) {  // valid JSON (true, a string): refused by the element check, as nested
      expect_same_either_way("FP64", Datatype::fp64, tokens);
    } else {
      EXPECT_EQ(parse(body, Datatype::fp64).refusal, expected) << bad;
    }
  }
  // An array of numbers where an object's key goes is not JSON, however long.
  for (const std::string& tail : {", " + join(filled({}), 0, 300) + ": 1", R"(, "parameters": {)" + join(filled({}), 0, 300) + ": 1}"}) {
    const auto body = flat("FP64", filled({}), tail);
    const auto expected = parser_refusal(body);
    EXPECT_NE(expected.find("syntax error while parsing object key"), std::string::npos) << expected;
    EXPECT_EQ(parse(body, Datatype::fp64).refusal, expected);
  }
  // Valid arrays, then JSON that is not: the message counts positions in the text as sent.
  const auto body = flat("FP32", filled({}), R"(, "parameters": {"a": })");
  const auto expected = parser_refusal(body);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(parse(body, Datatype::fp32).refusal, expected);
}

// Beside NaN tokens (markers of their own) and beside a client string of many NULs (no markers:
// the parser reads every array) the data is the same.
TEST(KserveJsonArrays, NonFiniteTokensAndLongNulRunsLeaveTheDataAsItIs) {
  auto tokens = filled({"1.5", "-0"});
  const std::string nan_parameter = R"(, "parameters": {"note": NaN})";
  const auto beside_nan = parse(flat("FP32", tokens, nan_parameter), Datatype::fp32);
  const auto beside_nan_nested = parse(nested("FP32", tokens, nan_parameter), Datatype::fp32);
  EXPECT_EQ(beside_nan.accepted, beside_nan_nested.accepted) << beside_nan.refusal << " | " << beside_nan_nested.refusal;
  EXPECT_TRUE(beside_nan.data == beside_nan_nested.data);
  EXPECT_EQ(beside_nan.refusal, beside_nan_nested.refusal);
  std::string nuls;
  for (int i = 0; i < 70; ++i) nuls += "\\u0000";
  const auto with_nuls = parse(flat("FP32", tokens, R"(, "id": ")" + nuls + "\""), Datatype::fp32);
  const auto parser = parse(nested("FP32", tokens), Datatype::fp32);
  ASSERT_TRUE(with_nuls.accepted) << with_nuls.refusal;
  EXPECT_TRUE(with_nuls.data == parser.data);
  tokens[100] = "NaN";  // not a number token: this array is the parser's
  const auto nan_flat = parse(flat("FP32", tokens), Datatype::fp32);
  const auto nan_nested = parse(nested("FP32", tokens), Datatype::fp32);
  ASSERT_TRUE(nan_flat.accepted) << nan_flat.refusal;
  EXPECT_TRUE(nan_flat.data == nan_nested.data);
}

}  // namespace
}  // namespace gpucap::service::kserve
