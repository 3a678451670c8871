// The KServe v2 codec's binary requests (Triton's binary tensor data extension,
// extension_binary_data.md: Inference-Header-Content-Length, binary chunks, length-prefixed BYTES)
// and a request's parameters (schedule policy, binary outputs, requested outputs): what Triton's
// clients send, and each framing error a 400 naming the problem.

#include "gpucap/service/kserve_protocol.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "service/kserve_codec_support.hpp"

namespace gpucap::service::kserve {
namespace {

using namespace codec_test;  // the codec tests' shared helpers (kserve_codec_support.hpp)

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

}  // namespace
}  // namespace gpucap::service::kserve
