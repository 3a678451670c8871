// The disk fills while gpucap writes its output (issue 38, services under faults): a clear
// one-line error, a non-zero exit, and the file an earlier run left is still there byte for byte
// (every output is written beside its target and renamed over it at the end). On a real 256 KiB
// tmpfs (tests/support/small_disk.hpp), through the real CLI on the twin.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/small_disk.hpp"

namespace gpucap {
namespace {

// An earlier run's trace, 4 KiB of it.
std::string previous_trace() {
  std::string text = "time_s,window_start_s,cap_w,window_max_w,window_mean_w,samples,batch_size,sm_clock_mhz\n";
  for (int i = 0; text.size() < 4096; ++i) text += std::to_string(i) + ".000,0.000,131,110.00,100.00,301,8,1063\n";
  return text;
}

// A run on the twin's P40 that streams its trace to the small disk.
std::vector<std::string> run_with_trace_on_disk(const std::string& images) {
  return {"run", "--gpu", "p40", "--model", "inception_v1", "--dataset", "imagenet", "--power-cap", "131", "--algorithm",
          "batchdvfs", "--images", images, "--trace", "{DISK}/trace.csv"};
}

TEST(DiskFull, RunTraceFailsClearlyAndKeepsThePreviousTrace) {
  const auto previous = previous_trace();
  // 3 million images on the twin stream ~60 KiB of rows (~1 s): the 8 KiB left run out mid-run.
  const auto run = test::run_on_full_disk("trace.csv", previous, 8, run_with_trace_on_disk("3000000"));
  test::expect_failed_cleanly(run, "trace.csv", previous, "trace.csv", /*failed_existed=*/true);
  EXPECT_EQ(run.exit_code, 4) << "an I/O error's exit code: " << run.err;
}

TEST(DiskFull, AFinishedRunStillReplacesThePreviousTrace) {
  const auto previous = previous_trace();
  const auto run = test::run_on_full_disk("trace.csv", previous, 128, run_with_trace_on_disk("30000"));
  ASSERT_TRUE(run.mounted) << "cannot mount a small tmpfs: " << run.mount_error;
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.previous_after.rfind("time_s,window_start_s,cap_w,window_max_w,window_mean_w,samples,batch_size,"
                                     "sm_clock_mhz,mem_clock_mhz",
                                     0),
            0u)
      << run.previous_after;
  EXPECT_NE(run.previous_after.find(",sim\n"), std::string::npos) << "this run's rows";
  EXPECT_EQ(run.files, std::vector<std::string>{"trace.csv"}) << "no temporary file left";
}

// share --trace streams a row per step: with 2000 requests beside a training job, far more than
// the 4 KiB left.
TEST(DiskFull, ShareTraceFailsClearlyAndKeepsThePreviousTrace) {
  const std::string previous = "job,step,device,start_s,end_s\nbg,0,rtx2080ti,0.000000000,0.100000000\n";
  const auto run = test::run_on_full_disk(
      "steps.csv", previous, 4,
      {"share", "--gpu", "rtx2080ti", "--job", "bg=train:keras_resnet50:batch=32:until=fg", "--job",
       "fg=infer:keras_vgg16:batch=1:priority=high:requests=2000:start=1", "--trace", "{DISK}/steps.csv"});
  test::expect_failed_cleanly(run, "steps.csv", previous, "steps.csv", /*failed_existed=*/true);
}

TEST(DiskFull, BenchOutFailsClearlyAndKeepsThePreviousResults) {
  const std::string previous = "job,algorithm,throughput_img_s\n1,batchdvfs,1000.0\n";
  test::TempDir dir;
  const auto matrix = dir.write("m.json", R"({"id": "tiny", "gpu": "p40", "jobs": [
      {"id": "1", "model": "inception_v1", "dataset": "imagenet", "cap_w": 131, "images": 2000},
      {"id": "2", "model": "resnet_v2_50", "dataset": "imagenet", "cap_w": 100, "images": 2000}]})");
  const auto run = test::run_on_full_disk("out/summary.csv", previous, 0,
                                          {"bench", "--matrix", matrix, "--algorithms", "batchdvfs,clipper", "--out",
                                           "{DISK}/out", "--jobs", "1"});
  test::expect_failed_cleanly(run, "out/summary.csv", previous, "traces/1-batchdvfs.csv", /*failed_existed=*/false);
}

}  // namespace
}  // namespace gpucap
