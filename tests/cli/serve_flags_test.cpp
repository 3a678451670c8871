// gpucap serve's flags: every bad one, or one that would go unused, is one line and an exit code
// before anything starts, binds or writes.

#include <gtest/gtest.h>

#include <string>

#include "support/cli_runner.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::expect_error;

TEST(ServeFlags, BadOnesAreOneLineBeforeAnythingStarts) {
  expect_error({"serve", "--model", "noop"}, 2, "give the cap to start with");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--admin", "127.0.0.1:0"}, 2,
               "--admin needs --admin-token-file");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--listen", "nowhere"}, 2, "--listen 'nowhere'");
  expect_error({"serve", "--model", "noop", "--power-cap", "9000"}, 2, "outside what the GPU can draw");
  expect_error({"serve", "--model", "bert_base_seq128", "--power-cap", "250"}, 2, "training workload");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--slo-ms", "0"}, 2, "--slo-ms 0");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--max-batch-size", "0"}, 2, "--max-batch-size 0");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--batch-timeout-s", "0"}, 2, "--batch-timeout-s 0");
  test::TempDir dir;
  const auto bad = dir.write("cap", "lots\n");
  expect_error({"serve", "--model", "noop", "--cap-file", bad}, 3, "is not a number of watts");
  // The file is checked at the start beside a schedule too (its cap holds until the first step).
  expect_error({"serve", "--model", "noop", "--cap-schedule", "60:180", "--cap-file", bad}, 3, "is not a number of watts");
  // Two caps for the start: one of them would go unused.
  const auto good = dir.write("good", "240\n");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--cap-file", good}, 2,
               "--power-cap and --cap-file both set the cap at the start");
  expect_error({"serve", "--model", "noop", "--cap-schedule", "0:250,60:180", "--cap-file", good}, 2,
               "--cap-schedule starts at 0 s, where --cap-file sets the cap");
  expect_error({"serve", "--model", "noop", "--power-cap", "200", "--cap-schedule", "0:250,60:180"}, 2,
               "--power-cap only sets the cap before the first step of --cap-schedule");
  // A real GPU's flags on the twin, and the benchmark input's where requests bring their own.
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--device", "1"}, 2,
               "--device does not apply to --platform twin");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--input-size", "299"}, 2,
               "--input-size does not apply to --platform twin");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--model-file", "m.pt"}, 2,
               "--model-file does not apply to --platform twin (use --model)");
  expect_error({"serve", "--platform", "nvml", "--model-file", "m.pt", "--power-cap", "250", "--images-dir", "."}, 2,
               "--images-dir does not apply here: the model runs on the requests' own data");
  expect_error({"serve", "--platform", "nvml", "--model-file", "m.pt", "--power-cap", "250", "--cuda-graphs"}, 2,
               "--cuda-graphs does not apply here");
  expect_error({"serve", "--platform", "nvml", "--model-file", "m.pt", "--power-cap", "250", "--noop-shape", "8"}, 2,
               "--noop-shape does not apply to --platform nvml");
  expect_error({"serve", "--platform", "nvml", "--model-file", "m.pt", "--power-cap", "250", "--algorithm", "static",
                "--warmup", "maybe"},
               2, "--warmup 'maybe' must be auto, on or off");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--warmup", "on"}, 2,
               "--warmup does not apply to --platform twin");
  // An algorithm serve does not run is named with the ones it does.
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--algorithm", "pctodl"}, 2,
               "--algorithm pctodl partitions a GPU among MPS tenants, and serve runs one model: give one of capserve, "
               "static, batchsizer");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--algorithm", "bobd"}, 2,
               "--algorithm bobd runs from an offline search");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--algorithm", "nosuch"}, 2,
               "--algorithm 'nosuch' is not one serve runs: capserve, static, batchsizer");
  // The token's refusals name serve's own flag.
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--admin", "127.0.0.1:0", "--admin-token-file",
                dir.write("token", "\n")},
               2, "--admin-token-file " + dir.write("token", "\n") + ": the file is empty");
  expect_error({"serve", "--model", "noop", "--power-cap", "250", "--platform", "tpu"}, 2, "--platform 'tpu'");
}

// A profile measured for another model, another GPU or on a real GPU is refused by its difference:
// capserve would plan the batches and the power from another's figures.
TEST(ServeFlags, AProfileMeasuredElsewhereIsRefusedByItsDifference) {
  test::TempDir dir;
  const std::string trials = R"("trials": [{"batch_size": 1, "sm_clock_mhz": 1410, "memory_clock_mhz": null,
    "throughput_img_s": 100, "max_power_w": 100}])";
  const auto serve = [](const std::string& profile) {
    return std::vector<std::string>{"serve", "--gpu", "a100", "--model", "vgg19", "--power-cap", "250", "--listen",
                                    "127.0.0.1:0", "--profile", profile};
  };
  const auto resnet = dir.write("resnet50.json", R"({"simulated": true, "gpu": "a100", "model": "resnet50", )" + trials + "}");
  expect_error(serve(resnet), 2,
               "--profile " + resnet + ": it was measured with model resnet50, and this runs vgg19; measure this one's with "
               "'gpucap tune --gpu a100 --model vgg19 --algorithm oracle --power-cap W --json'");
  const auto v100 = dir.write("v100.json", R"({"simulated": true, "gpu": "v100", "model": "vgg19", )" + trials + "}");
  expect_error(serve(v100), 2, "it was measured on v100, and this GPU is a100");
  const auto real = dir.write("real.json", R"({"simulated": false, "gpu": "NVIDIA A100-SXM4-40GB", "model": "vgg19.pt", )" +
                                               trials + "}");
  expect_error(serve(real), 2, "it was measured on a real GPU, and this runs on the twin");
}

}  // namespace
}  // namespace gpucap
