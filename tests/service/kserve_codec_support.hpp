#pragma once
// What the KServe v2 codec's tests share (kserve_protocol_test.cpp, kserve_binary_test.cpp,
// kserve_response_test.cpp and the codec's other tests): bytes of typed values and back, the models
// Triton's examples use, request JSON as tritonclient.http writes it, and the check that a call
// throws the protocol's error.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpucap/service/kserve_protocol.hpp"

namespace gpucap::service::kserve::codec_test {

using nlohmann::json;

template <typename T>
inline std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
inline std::vector<T> values_of(const std::vector<std::byte>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

template <typename T>
inline std::string raw(const std::vector<T>& values) {
  const auto bytes = bytes_of(values);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

inline std::string raw_bytes_tensor(const std::vector<std::string>& elements) {
  std::vector<std::byte> data;
  for (const auto& e : elements) append_bytes_element(data, e);
  return {reinterpret_cast<const char*>(data.data()), data.size()};
}

inline void expect_protocol_error(const std::function<void()>& call, int status, const std::string& fragment) {
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
inline ModelMetadata simple_model() {
  return {"simple",
          {"1"},
          "pytorch_libtorch",
          {{"INPUT0", Datatype::int32, {-1, 16}}, {"INPUT1", Datatype::int32, {-1, 16}}},
          {{"OUTPUT0", Datatype::int32, {-1, 16}}, {"OUTPUT1", Datatype::int32, {-1, 16}}},
          8};
}

inline ModelMetadata image_model() {
  return {"resnet50",
          {"1"},
          "pytorch_libtorch",
          {{"INPUT__0", Datatype::fp32, {-1, 3, 224, 224}}},
          {{"OUTPUT__0", Datatype::fp32, {-1, 1000}}},
          32};
}

// One input "x" of `datatype` with shape [-1, -1], batching up to 4.
inline ModelMetadata typed_model(Datatype datatype) {
  return {"typed", {"1"}, "custom", {{"x", datatype, {-1, -1}}}, {{"y", datatype, {-1, -1}}}, 4};
}

inline json input_json(const std::string& name, const std::string& datatype, const std::vector<std::int64_t>& shape,
                       const json& data) {
  return {{"name", name}, {"datatype", datatype}, {"shape", shape}, {"data", data}};
}

inline json binary_input_json(const std::string& name, const std::string& datatype, const std::vector<std::int64_t>& shape,
                              std::size_t size) {
  return {{"name", name}, {"datatype", datatype}, {"shape", shape}, {"parameters", {{"binary_data_size", size}}}};
}

inline json typed_request(const std::string& datatype, const json& data) {
  return {{"inputs", {input_json("x", datatype, {1, static_cast<std::int64_t>(data.size())}, data)}}};
}

inline std::vector<std::int32_t> iota_int32(std::int32_t from, std::size_t count) {
  std::vector<std::int32_t> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = from + static_cast<std::int32_t>(i);
  return values;
}

inline Tensor make_tensor(const std::string& name, Datatype datatype, std::vector<std::int64_t> shape,
                          std::vector<std::byte> data) {
  return {name, datatype, std::move(shape), std::move(data)};
}

}  // namespace gpucap::service::kserve::codec_test
