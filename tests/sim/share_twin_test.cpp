#include "gpucap/sim/share_twin.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::sim {
namespace {

sched::JobSpec job(const std::string& text) { return sched::parse_job_spec(text); }

TEST(ShareTwin, TrainingStepsMatchTheCalibratedThroughputEndToEnd) {
  const ShareTwin twin(test::data_dir());
  const auto gpu = twin.device("rtx2080ti");
  const auto p = twin.step(job("a=train:keras_resnet50:batch=32"), gpu, 0);
  // Fig. 7(b): 222.8 img/s solo, host stage included (within the 2 % step-to-step variation).
  EXPECT_NEAR(32.0 / (p.host_s + p.device_s()), 222.8, 222.8 * 0.06);
  EXPECT_EQ(p.kernels_s.size(), 1124U);
  // GPU-paced: dispatched at 27 µs an op, its kernels fill the device stage.
  EXPECT_DOUBLE_EQ(p.launch_s, 2.7e-5);
  double kernels = 0.0;
  for (const double k : p.kernels_s) kernels += k;
  EXPECT_GT(kernels, 0.95 * p.device_s());
  EXPECT_EQ(p.launch_window, 0);  // no window of its own: the stream's launch queue bounds it
  EXPECT_EQ(twin.stream_queue_depth(), 256);
  EXPECT_GT(p.state_bytes, 195.0 * 1024 * 1024);
  EXPECT_EQ(p.state_variables, 320 + 214);
}

TEST(ShareTwin, ABatchOneInferenceIsHostPacedAndAloneTakesItsCalibratedTime) {
  const ShareTwin twin(test::data_dir());
  const auto gpu = twin.device("rtx2080ti");
  const auto j = job("a=infer:keras_densenet121:batch=1");
  const auto p = twin.step(j, gpu, 0);
  double kernels = 0.0;
  for (const double k : p.kernels_s) kernels += k;
  // Its GPU work is its FLOPs (2 × 2.834 GMAC) at 5 TFLOP/s; the rest of its 13.92 ms is the
  // host dispatching 430 ops.
  EXPECT_NEAR(kernels, 2.0 * 2.8342e9 / 5e12, 1e-4);
  EXPECT_EQ(p.kernels_s.size(), 430U);
  EXPECT_GT(p.launch_s * 430, 0.8 * twin.device_stage_s(j, gpu));
  // Alone, the request (host stage, launches and kernels) takes the Fig. 6 SwitchFlow bar, within
  // the step-to-step variation of its kernels.
  EXPECT_NEAR(p.host_s + p.device_s(), 13.92e-3, 13.92e-3 * 0.01);
  // NMT's decoder syncs at each of its 60 decode steps.
  const auto nmt = twin.step(job("a=infer:nmt_wmt16:batch=1"), gpu, 0);
  EXPECT_EQ(nmt.sync_every, static_cast<int>(nmt.kernels_s.size()) / 60);
}

TEST(ShareTwin, TheCpuIsTwelveTimesSlowerThanThe1080Ti) {
  const ShareTwin twin(test::data_dir());
  const auto j = job("a=train:keras_resnet50:batch=32");
  EXPECT_NEAR(twin.device_stage_s(j, twin.device("cpu")) / twin.device_stage_s(j, twin.device("gtx1080ti")), 12.0, 1e-9);
}

TEST(ShareTwin, InferenceGrowsWithTheBatchAndTrainingIsThreeForwardPasses) {
  const ShareTwin twin(test::data_dir());
  const auto gpu = twin.device("rtx2080ti");
  // VGG19 has no BS-128 figure: inference follows the training step (three forward passes).
  const double one = twin.device_stage_s(job("a=infer:keras_vgg19:batch=1"), gpu);
  const double many = twin.device_stage_s(job("a=infer:keras_vgg19:batch=32"), gpu);
  const double train = twin.device_stage_s(job("a=train:keras_vgg19:batch=32"), gpu);
  EXPECT_GT(many, 5.0 * one);
  EXPECT_NEAR(train, 3.0 * many, 1e-9);
  // VGG16 has one (Fig. 3(d)): inference at BS 128 takes its GPU-busy time.
  EXPECT_NEAR(twin.device_stage_s(job("a=infer:keras_vgg16:batch=128"), gpu), 0.2216, 1e-9);
}

TEST(ShareTwin, JpegInputIsAnInputPipelineTimedByFig3) {
  const ShareTwin twin(test::data_dir());
  const auto v100 = twin.device("v100");
  const auto p = twin.step(job("a=infer:keras_resnet50:batch=128:input=jpeg"), v100, 0);
  EXPECT_TRUE(p.input_pipeline);
  EXPECT_NEAR(p.host_s, 0.3016 - 0.1160, 1e-9);  // Fig. 3(e): session − GPU
  EXPECT_THROW(twin.check(job("a=infer:keras_vgg19:batch=128:input=jpeg"), v100), Error);  // not in Fig. 3
  EXPECT_GT(twin.input_pipelines_at_once(), 0.0);
  EXPECT_DOUBLE_EQ(p.device_gap_s, 0.0);
  // Training (Fig. 3(b): 52.9 ms of non-GPU time at BS 32): only part of it is the pipeline (what
  // Fig. 8's reuse saves), the rest is the step's own host work, holding the device.
  const auto t = twin.step(job("a=train:keras_resnet50:batch=32:input=jpeg"), v100, 0);
  EXPECT_NEAR(t.host_s + t.device_gap_s, 0.0529, 1e-9);
  EXPECT_GT(t.device_gap_s, 0.0);
  EXPECT_GT(t.host_s, 0.0);
  EXPECT_DOUBLE_EQ(twin.step(job("a=train:keras_resnet50:batch=32"), v100, 0).device_gap_s, 0.0);  // synthetic input
}

TEST(ShareTwin, TransferFollowsTheFittedLaw) {
  const ShareTwin twin(test::data_dir());
  const auto vgg = job("a=train:keras_vgg16:batch=32");
  const double t = twin.transfer_s(vgg, twin.device("rtx2080ti"), twin.device("gtx1080ti"));
  EXPECT_NEAR(t, 0.1037, 0.1037 * 0.2);  // Table 1: 103.7 ms
  EXPECT_DOUBLE_EQ(twin.transfer_s(job("b=infer:keras_vgg16:batch=1"), twin.device("rtx2080ti"), twin.device("cpu")), 0.0);
}

TEST(ShareTwin, KernelTimesVaryFromStepToStepButNotBetweenRuns) {
  const ShareTwin a(test::data_dir(), 7);
  const ShareTwin b(test::data_dir(), 7);
  const auto gpu = a.device("v100");
  const auto j = job("a=train:keras_inception_v3:batch=32");
  EXPECT_EQ(a.step(j, gpu, 3).kernels_s, b.step(j, gpu, 3).kernels_s);
  EXPECT_NE(a.step(j, gpu, 3).kernels_s, a.step(j, gpu, 4).kernels_s);
}

// The H200 of gpucap's real LibTorch run: a training step's GPU time is given apart from the step
// (7.02 ms of its 37.1 ms at 862.6 img/s), and the rest is its host stage — the batch drawn on
// the CPU — not the synthetic copy.
TEST(ShareTwin, AnH200TrainingStepIsItsGpuTimeAfterItsHostStage) {
  const ShareTwin twin(test::data_dir());
  const auto gpu = twin.device("h200");
  const auto p = twin.step(job("a=train:torch_resnet18:batch=32"), gpu, 0);
  EXPECT_NEAR(p.device_s(), 7.02e-3, 7.02e-3 * 0.03);  // the step-to-step variation of its kernels
  EXPECT_NEAR(p.host_s, 32.0 / 862.6 - 7.02e-3, 1e-9);
  EXPECT_EQ(p.kernels_s.size(), 432U);  // models.json: the LibTorch rule of scripts/sched_model_facts_torch.py
  const auto half = twin.step(job("a=train:torch_resnet18:batch=16"), gpu, 0);
  EXPECT_NEAR(half.host_s, p.host_s / 2.0, 1e-9);  // drawn per image
  const auto request = twin.step(job("a=infer:torch_mobilenet_v2:batch=1"), gpu, 0);
  EXPECT_NEAR(request.host_s + request.device_s(), 3.27e-3, 3.27e-3 * 0.01);
  // The paper's GPUs have no figures for the torchvision models, nor the H200 for Keras's, nor
  // the paper's servers' CPU; an inference batch's host stage was not measured.
  EXPECT_THROW(twin.check(job("a=train:torch_resnet18"), twin.device("rtx2080ti")), Error);
  EXPECT_THROW(twin.check(job("a=train:keras_resnet50"), gpu), Error);
  EXPECT_THROW(twin.check(job("a=train:torch_resnet18"), twin.device("cpu")), Error);
  EXPECT_THROW(twin.check(job("a=infer:torch_mobilenet_v2:batch=8"), gpu), Error);
}

// A CPU LPU is the shared GPU's machine's CPU: the paper's servers' for their GPUs, the lent
// machine's for the h200. There, ResNet-18 training takes the step measured on it (4.04 s, host
// stage included), the rest is refused, and its one thread of 16 cores slows no other job's host
// work, where SwitchFlow's 64 threads on 36 cores do (Fig. 7(d)'s fitted 2.7).
TEST(ShareTwin, TheH200sCpuIsItsOwnHostWithoutContention) {
  const ShareTwin twin(test::data_dir());
  const auto host = twin.lpu_device("cpu", "h200");
  EXPECT_EQ(host.id, "h200_host");
  EXPECT_EQ(host.kind, sched::DeviceKind::cpu);
  EXPECT_EQ(twin.lpu_device("cpu", "v100").id, "cpu");
  EXPECT_EQ(twin.lpu_device("gtx1080ti", "rtx2080ti").id, "gtx1080ti");
  EXPECT_THROW((void)twin.lpu_device("h200_host", "v100"), Error);
  const auto train = job("a=train:torch_resnet18:batch=32");
  const auto p = twin.step(train, host, 0);
  EXPECT_NEAR(p.host_s + p.device_s(), 4.04, 4.04 * 0.03);  // the step-to-step variation of its chunks
  EXPECT_NEAR(twin.device_stage_s(job("a=train:torch_resnet18:batch=16"), host), twin.device_stage_s(train, host) / 2.0, 1e-9);
  EXPECT_THROW(twin.check(job("a=infer:torch_mobilenet_v2:batch=1"), host), Error);
  EXPECT_THROW(twin.check(job("a=train:torch_mobilenet_v2"), host), Error);
  EXPECT_THROW(twin.check(job("a=train:keras_resnet50"), host), Error);
  EXPECT_DOUBLE_EQ(twin.host_slowdown_with_cpu_jobs(host, 1), 0.0);
  EXPECT_DOUBLE_EQ(twin.host_slowdown_with_cpu_jobs(twin.device("cpu"), 1), 2.7);
}

// The twin read from a copy of data/sched/ whose FILE was edited (Error as the constructor's).
std::unique_ptr<ShareTwin> edited_twin(const std::string& file, const std::function<void(nlohmann::json&)>& edit) {
  const test::TempDir dir;
  const std::filesystem::path root(dir.path());
  std::filesystem::copy(test::data_dir() + "/sched", root / "sched");
  const auto path = root / "sched" / file;
  auto json = nlohmann::json::parse(std::ifstream(path));
  edit(json);
  std::ofstream(path) << json.dump();
  return std::make_unique<ShareTwin>(dir.path());
}

// Contention starts where the CPU jobs' threads and the slowed job's host thread outnumber the
// cores: one job of one thread and a host thread fit 2 cores, not 1; two such jobs do not fit 2.
TEST(ShareTwin, ACpuJobSlowsHostWorkOnlyWhereItsThreadsOutnumberTheCores) {
  const auto with_cores = [](int cores) {
    return edited_twin("devices.json", [cores](auto& j) { j["hosts"]["h200_host"]["cores"] = cores; });
  };
  const auto two = with_cores(2);
  EXPECT_DOUBLE_EQ(two->host_slowdown_with_cpu_jobs(two->device("h200_host"), 1), 0.0);
  EXPECT_DOUBLE_EQ(two->host_slowdown_with_cpu_jobs(two->device("h200_host"), 2), 2.7);
  const auto one = with_cores(1);
  EXPECT_DOUBLE_EQ(one->host_slowdown_with_cpu_jobs(one->device("h200_host"), 1), 2.7);
  // The paper's servers have 36 physical cores (their 72 hardware threads are not counted): a
  // pool of 35 threads would leave one to the host.
  const auto paper = edited_twin("calibration.json", [](auto& j) { j["cpus"]["cpu"]["job_threads"] = 35; });
  EXPECT_DOUBLE_EQ(paper->host_slowdown_with_cpu_jobs(paper->device("cpu"), 1), 0.0);
}

// Loads the twin from a copy of data/sched/ whose FILE was edited; expects Error(invalid_data)
// whose text holds `message`.
void expect_invalid(const std::string& file, const std::function<void(nlohmann::json&)>& edit, const std::string& message) {
  try {
    (void)edited_twin(file, edit);
    ADD_FAILURE() << "accepted: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

// Bad calibration data is one clear error naming the field: a GPU time not shorter than its step,
// one without a step, and a GPU scaled from one whose steps are given apart; a CPU without
// figures, or not a CPU, or with no threads.
TEST(ShareTwin, BadH200CalibrationIsInvalidData) {
  const auto calibration = [](const std::function<void(nlohmann::json&)>& edit, const std::string& message) {
    expect_invalid("calibration.json", edit, message);
  };
  calibration([](auto& j) { j["gpus"]["h200"]["train_bs32_gpu_ms"]["torch_resnet18"] = 40.0; },
              "torch_resnet18: 40 ms is not shorter than its step, 37.1 ms (862.6 img/s at BS 32)");
  calibration([](auto& j) { j["gpus"]["h200"]["train_bs32_img_s"].erase("torch_resnet18"); },
              "torch_resnet18: has no train_bs32_img_s on h200");
  calibration([](auto& j) { j["gpus"]["v100"]["relative_to"] = "h200"; },
              "'h200' gives its steps' GPU time apart (train_bs32_gpu_ms): not scalable");
  // A CPU with no figures, one that is no CPU of devices.json, a thread count that is none.
  calibration([](auto& j) { j["cpus"]["h200_host"].erase("train_bs32_step_s"); },
              "is needed where slowdown_vs is not: the CPU would have no figures");
  calibration([](auto& j) { j["cpus"]["v100"] = j["cpus"]["h200_host"]; }, "cpus.v100 has timings but is not a CPU of devices.json");
  calibration([](auto& j) { j["cpus"]["h200_host"]["job_threads"] = 0; }, "job_threads");
}

// A GPU's host must be a CPU of devices.json, and a host may not take another device's id.
TEST(ShareTwin, BadHostsAreInvalidData) {
  expect_invalid("devices.json", [](auto& j) { j["gpus"]["h200"]["host"] = "v100"; }, "'v100' is not a CPU of this file");
  expect_invalid("devices.json", [](auto& j) { j["gpus"]["h200"]["host"] = "nowhere"; }, "'nowhere' is not a CPU of this file");
  expect_invalid("devices.json", [](auto& j) { j["hosts"]["v100"] = j["hosts"]["h200_host"]; }, "is already a device of this file");
  expect_invalid("devices.json", [](auto& j) { j["hosts"]["h200_host"].erase("cores"); }, "cores");
}

TEST(ShareTwin, UnknownOrUnmodelledJobsAreUsageErrors) {
  const ShareTwin twin(test::data_dir());
  const auto gpu = twin.device("rtx2080ti");
  EXPECT_THROW(twin.check(job("a=train:resnet18"), gpu), Error);
  EXPECT_THROW(twin.check(job("a=train:nmt_wmt16"), gpu), Error);
  EXPECT_THROW(twin.check(job("a=infer:nmt_wmt16:batch=4"), gpu), Error);
  EXPECT_NO_THROW(twin.check(job("a=infer:nmt_wmt16:batch=1"), gpu));
  EXPECT_THROW((void)twin.device("tpu"), Error);
  EXPECT_THROW(ShareTwin("/nonexistent"), Error);
}

}  // namespace
}  // namespace gpucap::sim
