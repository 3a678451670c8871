// The tokens NaN, Inf and Infinity (optionally after '-') in a request's JSON, which Triton's parser
// reads as numbers (RapidJSON's kParseNanAndInfFlag) and python-rapidjson (tritonclient.http's
// encoder) and Python's json module write for a float array holding nan or inf: read as the
// numbers they name where a number may stand, refused anywhere else, and never taken from inside
// a string.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpucap/service/kserve_protocol.hpp"
#include "service/kserve_codec_support.hpp"

namespace gpucap::service::kserve {
namespace {

using codec_test::typed_model;
using codec_test::values_of;

std::string request_with_data(const std::string& datatype, int count, const std::string& data,
                              const std::string& extra = "") {
  return R"({"inputs": [{"name": "x", "datatype": ")" + datatype + R"(", "shape": [1, )" + std::to_string(count) +
         R"(], "data": )" + data + "}]" + extra + "}";
}

std::string refusal(const std::string& body, Datatype datatype) {
  try {
    (void)parse_infer_request(body, std::nullopt, typed_model(datatype));
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.http_status(), 400) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << body;
  return "";
}

TEST(KserveNonFinite, FloatInputsTakeTheTokensAsTritonReadsThem) {
  const std::string data = "[NaN, Infinity, -Infinity, Inf, -Inf, -NaN, 1.5,NaN,-Infinity]";
  const auto r = parse_infer_request(request_with_data("FP32", 9, data), std::nullopt, typed_model(Datatype::fp32));
  const auto values = values_of<float>(r.inputs[0].data);
  ASSERT_EQ(values.size(), 9u);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_EQ(values[1], inf);
  EXPECT_EQ(values[2], -inf);
  EXPECT_EQ(values[3], inf);
  EXPECT_EQ(values[4], -inf);
  EXPECT_TRUE(std::isnan(values[5]));
  EXPECT_EQ(values[6], 1.5f);
  EXPECT_TRUE(std::isnan(values[7]));
  EXPECT_EQ(values[8], -inf);

  // Nested, FP64, spaced and on several lines, as json.dumps(indent=2) writes it.
  const auto nested = parse_infer_request(request_with_data("FP64", 2, "[\n  [\n    NaN,\n    -Infinity\n  ]\n]"),
                                          std::nullopt, typed_model(Datatype::fp64));
  const auto doubles = values_of<double>(nested.inputs[0].data);
  ASSERT_EQ(doubles.size(), 2u);
  EXPECT_TRUE(std::isnan(doubles[0]));
  EXPECT_EQ(doubles[1], -std::numeric_limits<double>::infinity());
}

TEST(KserveNonFinite, StringsThatSpellTheTokensStayStrings) {
  const auto body = R"({"id": "NaN [Infinity, -Inf]", "inputs": [{"name": "x", "datatype": "BYTES", "shape": [1, 3], )"
                    R"("data": ["NaN", "\"NaN\\", "Infinity"]}]})";
  const auto r = parse_infer_request(body, std::nullopt, typed_model(Datatype::bytes));
  EXPECT_EQ(r.id, "NaN [Infinity, -Inf]");
  const auto elements = bytes_elements(r.inputs[0].data);
  ASSERT_EQ(elements.size(), 3u);
  EXPECT_EQ(elements[0], "NaN");
  EXPECT_EQ(elements[1], "\"NaN\\");
  EXPECT_EQ(elements[2], "Infinity");
}

TEST(KserveNonFinite, AClientsOwnStringIsNeverTakenForAToken) {
  // Beside a bare NaN, strings holding NULs and a spelling of the tokens stay the client's strings,
  // whatever run of NULs they hold (the server's markers are longer).
  const std::string body = R"({"id": "\u0000NaN", "inputs": [{"name": "x", "datatype": "BYTES", "shape": [1, 4], )"
                           R"("data": ["\u0000NaN", "\u0000\u0000-Infinity", "a\u0000Infinity", "\\u0000NaN"]}], )"
                           R"("parameters": {"custom": NaN}})";
  const auto r = parse_infer_request(body, std::nullopt, typed_model(Datatype::bytes));
  EXPECT_EQ(r.id, std::string("\0NaN", 4));
  const auto elements = bytes_elements(r.inputs[0].data);
  ASSERT_EQ(elements.size(), 4u);
  EXPECT_EQ(elements[0], std::string("\0NaN", 4));
  EXPECT_EQ(elements[1], std::string("\0\0-Infinity", 11));
  EXPECT_EQ(elements[2], std::string("a\0Infinity", 10));
  EXPECT_EQ(elements[3], "\\u0000NaN");
  // An FP32 element written as such a string is a string, not a number, bare token or not.
  EXPECT_NE(refusal(request_with_data("FP32", 2, R"(["\u0000NaN", NaN])"), Datatype::fp32)
                .find("element 0: \"\\u0000NaN\" is not a number within FP32 range"),
            std::string::npos);
  // A run of 64 NULs beside a token is refused rather than given markers as long.
  std::string nuls;
  for (int i = 0; i < 64; ++i) nuls += "\\u0000";
  EXPECT_NE(refusal(request_with_data("FP32", 1, "[NaN]", R"(, "id": ")" + nuls + R"(")"), Datatype::fp32)
                .find("64 or more NUL characters"),
            std::string::npos);
  nuls.resize(nuls.size() - 6);
  EXPECT_NO_THROW((void)parse_infer_request(request_with_data("FP32", 1, "[NaN]", R"(, "id": ")" + nuls + R"(")"),
                                            std::nullopt, typed_model(Datatype::fp32)));
}

// Many tokens beside a long run of NULs would make the text the parser reads many times the
// client's: refused once it would pass 5 times (and 64 KiB); the same tokens beside no NULs, or
// a few of them beside the same run, are read.
TEST(KserveNonFinite, MarkersNeverMakeTheTextManyTimesTheBody) {
  constexpr int kTokens = 100'000;
  std::string data = "[NaN";
  for (int i = 1; i < kTokens; ++i) data += ",NaN";
  data += "]";
  std::string nuls;
  for (int i = 0; i < 30; ++i) nuls += "\\u0000";
  const auto beside = [&nuls](const std::string& datatype, int count, const std::string& values) {
    return request_with_data(datatype, count, values, R"(, "id": ")" + nuls + R"(")");
  };
  const auto message = refusal(beside("FP32", kTokens, data), Datatype::fp32);
  EXPECT_NE(message.find("the inference request's 100000 NaN or Infinity tokens, beside a string of 30 NUL characters "
                         "(\\u0000) in a row, would take"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("send fewer NULs, or the tensor as binary data"), std::string::npos) << message;

  const auto plain = parse_infer_request(request_with_data("FP32", kTokens, data), std::nullopt, typed_model(Datatype::fp32));
  const auto values = values_of<float>(plain.inputs[0].data);
  ASSERT_EQ(values.size(), static_cast<std::size_t>(kTokens));
  EXPECT_TRUE(std::isnan(values.front()) && std::isnan(values.back()));
  std::string infinities = "[Inf";
  for (int i = 1; i < kTokens; ++i) infinities += ",Inf";
  EXPECT_NO_THROW((void)parse_infer_request(request_with_data("FP32", kTokens, infinities + "]"), std::nullopt,
                                            typed_model(Datatype::fp32)))
      << "the shortest spelling, the most growth without NULs: 4.25 times";
  EXPECT_NO_THROW((void)parse_infer_request(beside("FP32", 3, "[NaN, Infinity, -Inf]"), std::nullopt,
                                            typed_model(Datatype::fp32)));
}

TEST(KserveNonFinite, TokensInTheBinaryExtensionsHeader) {
  // The JSON header before binary data (Inference-Header-Content-Length): its tokens are read, the
  // binary bytes after it are not looked at; a token may end the header.
  const std::string header = R"({"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 2], "data": [Inf, -NaN]}]})";
  const auto r = parse_infer_request(header, header.size(), typed_model(Datatype::fp64));
  const auto values = values_of<double>(r.inputs[0].data);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0], std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(values[1]));
  EXPECT_NE(refusal("NaN", Datatype::fp32).find("must be a JSON object, not NaN"), std::string::npos);
  EXPECT_NE(refusal("[1, -Infinity", Datatype::fp32).find("not valid JSON"), std::string::npos);
}

TEST(KserveNonFinite, WhereNoNumberMayStandOrNoneIsTakenTheyAreRefused) {
  // Inputs that take no such number name it as the client wrote it.
  EXPECT_NE(refusal(request_with_data("INT32", 2, "[1, NaN]"), Datatype::int32)
                .find("input 'x' element 1: NaN is not an integer in [-2147483648, 2147483647] (INT32)"),
            std::string::npos);
  EXPECT_NE(refusal(request_with_data("BYTES", 1, "[-Infinity]"), Datatype::bytes)
                .find("element 0: -Infinity is not a string (BYTES)"),
            std::string::npos);
  EXPECT_NE(refusal(request_with_data("BOOL", 1, "[Inf]"), Datatype::boolean).find("Infinity is not true or false"),
            std::string::npos);
  EXPECT_NE(refusal(request_with_data("FP32", 1, "[1]", R"(, "parameters": {"priority": NaN})"), Datatype::fp32)
                .find("parameters.priority must be a non-negative integer, not NaN"),
            std::string::npos);
  // Not JSON, and not what RapidJSON reads either: an object's key, a token that runs on, other spellings.
  for (const std::string bad : {"[NaNx]", "[Infinit]", "[nan]", "[+Infinity]", "[- NaN]", "[NAN]"}) {
    EXPECT_NE(refusal(request_with_data("FP32", 1, bad), Datatype::fp32).find("not valid JSON"), std::string::npos) << bad;
  }
  EXPECT_NE(refusal(R"({NaN: 1, "inputs": []})", Datatype::fp32).find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal(R"({"inputs": [], "a": 1, Infinity: 2})", Datatype::fp32).find("not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace gpucap::service::kserve
