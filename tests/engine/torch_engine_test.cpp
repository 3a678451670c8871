// The LibTorch engine on the CPU against Python: scripts/export_models.py (the CTest fixture
// export_torch_models) exports two torchvision models with random weights and writes 8 random
// images and the Python model's output for them; the engine must reproduce that output at every
// batch size.

#include "gpucap/engine/torch_engine.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <turbojpeg.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "support/expect_error.hpp"
#include "support/paths.hpp"

namespace gpucap::engine {
namespace {

std::string model_path(const std::string& name, const std::string& suffix) {
  return std::string(GPUCAP_TEST_MODELS_DIR) + "/" + name + suffix;
}

std::vector<float> read_floats(const std::string& path) {
  const auto bytes = read_text_file(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class TorchEngineAgainstPython : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchEngineAgainstPython, OutputsMatchThePythonModelAtEveryBatchSize) {
  const auto name = GetParam();
  const auto reference = nlohmann::json::parse(read_text_file(model_path(name, ".reference.json")));
  const auto input = read_floats(model_path(name, ".input.f32"));
  const auto expected = read_floats(model_path(name, ".output.f32"));
  const auto batch = reference["input_shape"][0].get<int>();
  const auto size = reference["input_shape"][2].get<int>();
  const auto classes = reference["output_shape"][1].get<std::size_t>();
  ASSERT_EQ(expected.size(), static_cast<std::size_t>(batch) * classes);
  // Random weights must still give an output that varies, or the comparison proves nothing.
  const auto [low, high] = std::minmax_element(expected.begin(), expected.end());
  ASSERT_GT(*high - *low, 1e-3) << name << ": the reference output is constant";

  TorchEngineOptions options;
  options.model_file = model_path(name, ".pt");
  options.input_size = size;
  const TorchEngine engine(options, steady_now_s);
  const std::size_t per_image = 3u * static_cast<std::size_t>(size) * static_cast<std::size_t>(size);
  for (const int b : {1, 3, batch}) {
    const std::vector<float> part(input.begin(), input.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b) * per_image));
    std::vector<std::int64_t> shape;
    const auto output = engine.infer(part, b, &shape);
    ASSERT_EQ(shape, (std::vector<std::int64_t>{b, static_cast<std::int64_t>(classes)}));
    double worst = 0.0;
    for (std::size_t i = 0; i < output.size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(output[i]) - expected[i]) / (1e-3 + std::abs(expected[i])));
    }
    EXPECT_LT(worst, 1e-3) << name << " batch " << b << ": worst relative difference from Python";
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, TorchEngineAgainstPython, ::testing::Values("mobilenet_v2", "mnasnet0_5"));

// BF16 on the CPU: the same model in bfloat16 (8 bits of mantissa) stays close to the FP32 output:
// through this network of random weights its rounding adds up to about 12 % (L2); a wrong layout or
// dtype would give 100 % or more.
TEST(TorchEngine, Bf16RunsOnTheCpuCloseToFp32) {
  const std::string name = "mnasnet0_5";
  const auto reference = nlohmann::json::parse(read_text_file(model_path(name, ".reference.json")));
  const auto input = read_floats(model_path(name, ".input.f32"));
  const auto expected = read_floats(model_path(name, ".output.f32"));
  const auto size = reference["input_shape"][2].get<int>();
  const auto batch = reference["input_shape"][0].get<int>();
  TorchEngineOptions options;
  options.model_file = model_path(name, ".pt");
  options.input_size = size;
  options.precision = TorchPrecision::bf16;
  TorchEngine engine(options, steady_now_s);
  EXPECT_NE(engine.name().find("cpu, bf16"), std::string::npos) << engine.name();
  const auto output = engine.infer(input, batch);
  ASSERT_EQ(output.size(), expected.size());
  double error = 0.0;
  double norm = 0.0;
  for (std::size_t i = 0; i < output.size(); ++i) {
    error += (output[i] - expected[i]) * (output[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  EXPECT_LT(std::sqrt(error / norm), 0.25) << "relative L2 distance from the FP32 reference";
  EXPECT_GT(std::sqrt(error / norm), 0.0) << "it did run in a lower precision";
  EXPECT_EQ(engine.run_batch(2).images, 2);
}

TEST(TorchEngine, RunsBatchesOfAnySizeAndTimesThem) {
  TorchEngineOptions options;
  options.model_file = model_path("mnasnet0_5", ".pt");
  options.input_size = 64;  // a smaller image keeps the test fast; the network is size-agnostic
  TorchEngine engine(options, steady_now_s);
  EXPECT_NE(engine.name().find("cpu, fp32"), std::string::npos) << engine.name();
  for (const int b : {1, 2, 5, 3}) {
    const auto r = engine.run_batch(b);
    EXPECT_EQ(r.images, b);
    EXPECT_GT(r.latency_s(), 0.0);
  }
  EXPECT_THROW((void)engine.run_batch(0), Error);
}

// A JPEG of `width` × `height` with a colour gradient, written with libjpeg-turbo.
std::string write_jpeg(const test::TempDir& dir, const std::string& name, int width, int height) {
  std::vector<unsigned char> rgb(static_cast<std::size_t>(width * height * 3));
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      auto* p = &rgb[static_cast<std::size_t>((y * width + x) * 3)];
      p[0] = static_cast<unsigned char>(255 * x / width);
      p[1] = static_cast<unsigned char>(255 * y / height);
      p[2] = 128;
    }
  }
  tjhandle compressor = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int status = tjCompress2(compressor, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_420, 90, 0);
  std::string bytes(reinterpret_cast<const char*>(jpeg), size);
  tjFree(jpeg);
  tjDestroy(compressor);
  EXPECT_EQ(status, 0);
  return dir.write(name, bytes);
}

TEST(TorchEngine, RunsOnAFolderOfJpegImagesOfAnySize) {
  test::TempDir images;
  write_jpeg(images, "a.jpg", 300, 200);
  write_jpeg(images, "b.jpg", 40, 64);  // smaller than the input: scaled up
  write_jpeg(images, "c.jpeg", 500, 500);
  TorchEngineOptions options;
  options.model_file = model_path("mnasnet0_5", ".pt");
  options.input_size = 64;
  options.images_dir = images.path();
  TorchEngine engine(options, steady_now_s);
  for (const int b : {2, 5, 1}) EXPECT_EQ(engine.run_batch(b).images, b) << "batches cycle through the 3 images";

  test::TempDir broken;
  write_jpeg(broken, "good.jpg", 64, 64);
  broken.write("notes.txt", "not an image");
  options.images_dir = broken.path();
  try {
    TorchEngine e(options, steady_now_s);
    FAIL() << "an unreadable file must be an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_NE(std::string(e.what()).find("notes.txt: not a JPEG image"), std::string::npos) << e.what();
  }
  test::TempDir empty;
  options.images_dir = empty.path();
  EXPECT_THROW(TorchEngine(options, steady_now_s), Error);
  options.images_dir = empty.file("missing");
  try {
    TorchEngine e(options, steady_now_s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io) << e.what();
  }
}

using test::expect_error_from;

TEST(TorchEngine, BadModelsDevicesAndInputsAreClearErrors) {
  test::TempDir dir;
  TorchEngineOptions options;
  options.model_file = dir.file("missing.pt");
  expect_error_from([&] { TorchEngine e(options, steady_now_s); }, ErrorCode::invalid_data, "missing.pt: not a TorchScript");
  options.model_file = dir.write("junk.pt", "this is not a model");
  expect_error_from([&] { TorchEngine e(options, steady_now_s); }, ErrorCode::invalid_data, "junk.pt: not a TorchScript");
  options.model_file = model_path("mnasnet0_5", ".pt");
  options.precision = TorchPrecision::fp16;
  expect_error_from([&] { TorchEngine e(options, steady_now_s); }, ErrorCode::unsupported, "FP16 inference needs a CUDA");
  options.precision = TorchPrecision::fp32;
  options.cuda_graphs = true;
  expect_error_from([&] { TorchEngine e(options, steady_now_s); }, ErrorCode::unsupported, "CUDA graphs need a CUDA device");
  options.cuda_graphs = false;
  expect_error_from([] { (void)parse_torch_precision("int8"); }, ErrorCode::usage, "'int8' must be fp32, fp16 or bf16");
  options.device = "tpu";
  expect_error_from([&] { TorchEngine e(options, steady_now_s); }, ErrorCode::usage, "device 'tpu'");
  options.device = "cpu";
  const TorchEngine engine(options, steady_now_s);
  expect_error_from([&] { (void)engine.infer(std::vector<float>(10), 1); }, ErrorCode::usage, "input of 10 values");
}

}  // namespace
}  // namespace gpucap::engine
