// gpucap share end to end: its outputs on the twin, and one clear error line for bad input.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpucap/bench/switchflow_paper.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "support/cli_runner.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;
using test::with;

const std::vector<std::string> kPair = {"share", "--gpu", "rtx2080ti", "--job", "bg=train:keras_resnet50:batch=32:until=fg",
                                        "--job", "fg=infer:keras_vgg16:batch=1:priority=high:requests=50:start=1"};

nlohmann::json run_json(const std::vector<std::string>& extra) {
  const auto r = gpucap(with(with(kPair, extra), {"--json"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(ShareCli, JsonHasTheFiguresOfEveryJobAndPreemption) {
  const auto flow = run_json({"--policy", "switchflow", "--lpu", "gtx1080ti"});
  EXPECT_TRUE(flow.at("simulated").get<bool>());
  ASSERT_EQ(flow.at("jobs").size(), 2U);
  const auto& fg = flow.at("jobs").at(1);
  EXPECT_EQ(fg.at("name"), "fg");
  for (const char* key : {"p50", "p95", "p99"}) EXPECT_GT(fg.at("latency_ms").at(key).get<double>(), 0.0) << key;
  EXPECT_GT(fg.at("throughput_img_s").get<double>(), 0.0);
  EXPECT_FALSE(fg.at("oom").get<bool>());
  ASSERT_EQ(flow.at("preemptions").size(), 1U);
  const auto& p = flow.at("preemptions").at(0);
  EXPECT_EQ(p.at("victim"), "bg");
  EXPECT_GT(p.at("state_bytes").get<double>(), 190.0 * 1024 * 1024);  // ResNet50's weights and momentum
  EXPECT_GT(p.at("transfer_ms").get<double>(), 0.0);
  EXPECT_GT(flow.at("energy_j").get<double>(), 0.0);

  // Free sharing makes the BS-1 inference wait behind the training job's kernels.
  const auto threads = run_json({"--policy", "threads"});
  EXPECT_GT(threads.at("jobs").at(1).at("latency_ms").at("p95").get<double>(),
            2.0 * fg.at("latency_ms").at("p95").get<double>());
  EXPECT_TRUE(threads.at("preemptions").empty());
}

// On the h200, --lpu cpu is the lent machine's CPU: the preempted ResNet-18 training moves there
// (its step: 4.04 s, measured), and its one thread leaves the request at its solo time.
TEST(ShareCli, OnTheH200TheCpuLpuIsItsOwnHost) {
  const std::vector<std::string> jobs = {"--job", "bg=train:torch_resnet18:until=fg", "--job",
                                         "fg=infer:torch_mobilenet_v2:batch=1:priority=high:requests=40:warmup=5:start=1"};
  const auto r = gpucap(with({"share", "--gpu", "h200", "--policy", "switchflow", "--lpu", "cpu", "--json"}, jobs));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json.at("lpu"), "h200_host");
  const auto& bg = json.at("jobs").at(0);
  EXPECT_EQ(bg.at("steps_on_lpu").get<int>(), 1);
  const auto& fg = json.at("jobs").at(1);
  EXPECT_NEAR(fg.at("latency_ms").at("p95").get<double>(), 3.27, 0.05);  // calibration.json: the request alone
}

TEST(ShareCli, TextSaysSimulatedAndTheTraceListsEveryStep) {
  test::TempDir dir;
  const auto trace = dir.file("steps.csv");
  const auto r = gpucap(with(kPair, {"--lpu", "cpu", "--trace", trace}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[simulated"), std::string::npos);
  EXPECT_NE(r.out.find("preemption at"), std::string::npos);
  const auto text = read_text_file(trace);  // split() gives views into it
  const auto lines = split(text, '\n');
  ASSERT_GT(lines.size(), 50U);
  EXPECT_EQ(lines[0], "job,step,device,start_s,end_s");
  EXPECT_NE(read_text_file(trace).find(",cpu,"), std::string::npos);  // bg's steps on the CPU
}

// 3000 requests, each preempting the training job: the JSON lists the first 1000 preemptions
// (sched::kListedEvents) and counts them all, the figures cover every request, and --trace gets
// every step (written as they complete, none kept). Before, every preemption and request latency
// was kept in memory (and listed): requests=100000000 grew the process without bound.
TEST(ShareCli, ManyRequestsListABoundedNumberOfPreemptionsAndCountThemAll) {
  test::TempDir dir;
  const auto trace = dir.file("steps.csv");
  const auto r = gpucap({"share", "--gpu", "rtx2080ti", "--job", "bg=train:keras_resnet50:batch=32:until=fg", "--job",
                         "fg=infer:keras_vgg16:batch=1:priority=high:requests=3000:slo_ms=20", "--json", "--trace", trace});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("preemptions").size(), 1000U);
  EXPECT_EQ(j.at("preemption_count").get<int>(), 2999);  // every request but the first found bg on the GPU
  EXPECT_EQ(j.at("migration_count").get<int>(), 0);
  const auto& fg = j.at("jobs").at(1);
  EXPECT_EQ(fg.at("requests").get<int>(), 3000);
  EXPECT_GT(fg.at("latency_ms").at("p99").get<double>(), 0.0);
  EXPECT_GE(fg.at("slo_attainment").get<double>(), 0.0);
  const auto text = read_text_file(trace);
  EXPECT_EQ(split(text, '\n').size(), 1U + 3000U + 1U + 1U);  // header, fg's requests, bg's step, the final newline
}

TEST(ShareCli, BadInputIsOneLineAndExitTwo) {
  expect_error({"share", "--job", "a=train:no_such_model"}, 2, "unknown model 'no_such_model'");
  expect_error({"share", "--gpu", "a100", "--job", "a=train:keras_vgg16"}, 2, "unknown device 'a100'");
  expect_error({"share", "--job", "a=fly:keras_vgg16"}, 2, "neither train nor infer");
  expect_error({"share", "--job", "a=train:keras_vgg16", "--job", "a=infer:keras_vgg16"}, 2, "two jobs are named 'a'");
  expect_error({"share", "--policy", "threads", "--lpu", "cpu", "--job", "a=train:keras_vgg16"}, 2, "does not move jobs");
  expect_error({"share", "--lpu", "rtx2080ti", "--job", "a=train:keras_vgg16"}, 2, "the shared GPU itself");
  expect_error({"share", "--job", "a=train:nmt_wmt16"}, 2, "inference only");
  // A CPU LPU is the shared GPU's host: another machine's is refused, and so is a job the host has
  // no figures for, but only where it can be preempted (the highest priority never moves).
  expect_error({"share", "--lpu", "h200_host", "--job", "a=train:keras_vgg16"}, 2,
               "--lpu h200_host is the CPU of another machine: rtx2080ti's host is cpu (--lpu cpu)");
  expect_error({"share", "--gpu", "h200", "--lpu", "cpu", "--job", "bg=train:torch_mobilenet_v2:until=fg", "--job",
                "fg=infer:torch_mobilenet_v2:batch=1:priority=high:requests=5"},
               2, "the share twin has only measured training steps on h200_host (torch_resnet18): not torch_mobilenet_v2 training");
  expect_error({"share", "--job", "a=train:keras_vgg16:until=b"}, 2, "names no other job");
  expect_error({"share", "--policy", "gandiva", "--job", "a=train:keras_vgg16"}, 2, "--policy 'gandiva'");
  expect_error({"share", "--gpu", "cpu", "--job", "a=train:keras_vgg16"}, 2, "is not a GPU");
  expect_error({"share", "--gpu", "h200_host", "--job", "a=train:torch_resnet18"}, 2, "--gpu h200_host is not a GPU");
  expect_error({"share", "--job", "a=train:keras_nasnet_large:batch=64"}, 2, "cannot run even alone");
  // Jobs that wait for each other would run until --max-time: refused, naming the cycle.
  expect_error({"share", "--job", "a=train:keras_vgg16:until=b", "--job", "b=train:keras_resnet50:until=a"}, 2,
               "jobs a -> b -> a wait for each other (until=)");
  expect_error({"share", "--job", "a=train:keras_vgg16:until=b", "--job", "b=train:keras_resnet50:until=c", "--job",
                "c=infer:keras_resnet50:until=a"},
               2, "jobs a -> b -> c -> a wait for each other (until=)");
}

// A bad number is named as it was typed, in one short line (CLI11's PositiveNumber printed the
// range it wanted, 2.2e-308 to 1.8e308, with std::to_string: a 300-digit number).
TEST(ShareCli, BadNumbersAreNamedAsTypedInOneShortLine) {
  for (const std::string flag : {"--window", "--max-time"}) {
    for (const std::string value : {"-1", "0", "1e-400", "1e400", "-1e308", "nan", "lots"}) {
      const auto r = gpucap({"share", "--job", "a=train:keras_vgg16:steps=5", flag, value});
      EXPECT_EQ(r.exit_code, 2) << flag << " " << value << ": " << r.err;
      EXPECT_NE(r.err.find(flag + ": must be a positive number, not '" + value + "'"), std::string::npos) << r.err;
      EXPECT_LT(r.err.size(), 120U) << r.err;
    }
  }
}

// The GPU draws its idle power doing nothing (55 W for the RTX 2080 Ti with a CUDA context open,
// data/sched/devices.json): a cap below it can never be kept, so it is refused, naming both.
TEST(ShareCli, ACapBelowTheGpusIdlePowerIsRefused) {
  expect_error({"share", "--power-cap", "30", "--job", "a=train:keras_vgg16:steps=5"}, 2,
               "--power-cap 30 W is below the rtx2080ti's idle power (55 W)");
  expect_error({"share", "--gpu", "v100", "--power-cap", "39.5", "--job", "a=train:keras_vgg16:steps=5"}, 2,
               "--power-cap 39.5 W is below the v100's idle power (");
  expect_error({"share", "--cap-schedule", "0:200,5:40", "--job", "a=train:keras_vgg16:steps=5"}, 2,
               "--cap-schedule 0:200,5:40: 40 W from 5 s is below the rtx2080ti's idle power (55 W)");
  expect_error({"share", "--power-cap", "20", "--cap-schedule", "5:150", "--job", "a=train:keras_vgg16:steps=5"}, 2,
               "20 W from 0 s is below the rtx2080ti's idle power (55 W)");
  const auto at_idle = gpucap({"share", "--power-cap", "55", "--job", "a=train:keras_vgg16:steps=5"});
  EXPECT_EQ(at_idle.exit_code, 0) << at_idle.err;
}

TEST(ShareCli, ListShowsTheShareTwinsModelsDevicesAndMatrices) {
  const auto share = gpucap({"list", "share", "--json"});
  ASSERT_EQ(share.exit_code, 0) << share.err;
  const auto json = nlohmann::json::parse(share.out);
  // The paper's eleven Keras models and the NMT decoder, and the two torchvision models of the real H200 run.
  EXPECT_EQ(json.at("models").size(), 14U);
  EXPECT_EQ(json.at("devices").size(), 6U);  // gtx1080ti, rtx2080ti, v100, h200, cpu, h200_host
  const auto matrices = gpucap({"list", "matrices"});
  EXPECT_NE(matrices.out.find("switchflow-cap"), std::string::npos);
  for (const auto& name : bench::switchflow_matrix_names()) EXPECT_NE(matrices.out.find(name + " "), std::string::npos) << name;
}

TEST(ShareCli, OutOfMemoryIsReportedNotACrash) {
  // Fig. 7(a): ResNet50 and DenseNet121 training do not fit together on the 1080 Ti under threads.
  const auto r = gpucap({"share", "--gpu", "gtx1080ti", "--policy", "threads", "--json", "--job",
                         "bg=train:keras_resnet50:steps=20", "--job", "p=train:keras_densenet121:steps=5:start=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_TRUE(json.at("jobs").at(0).at("oom").get<bool>());
  EXPECT_TRUE(json.at("jobs").at(1).at("oom").get<bool>());
}

TEST(ShareCli, CapshareKeepsTheSloUnderTheCapAndSaysSo) {
  const std::vector<std::string> jobs = {"--job", "bg=train:keras_vgg16:until=fg", "--job",
                                         "fg=infer:keras_resnet50:batch=1:priority=high:rate=50:requests=300:slo_ms=20:start=0.5"};
  const auto r = gpucap(with(with({"share", "--algorithm", "capshare", "--cap-schedule", "0:160,3:130", "--json"}, jobs), {}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json.at("cap").at("schedule"), "0:160,3:130");
  EXPECT_EQ(json.at("cap").at("windows_over_cap_outside_steps"), 0);
  EXPECT_GT(json.at("cap").at("windows").get<int>(), 30);
  EXPECT_GE(json.at("jobs").at(1).at("slo_attainment").get<double>(), 0.99);
  EXPECT_GT(json.at("jobs").at(0).at("throughput_img_s").get<double>(), 0.0);

  expect_error(with({"share", "--algorithm", "capshare"}, jobs), 2, "give --power-cap or --cap-schedule");
  expect_error(with({"share", "--algorithm", "capshare", "--policy", "threads", "--power-cap", "150"}, jobs), 2,
               "runs with --policy switchflow");
  expect_error({"share", "--algorithm", "capshare", "--power-cap", "150", "--job", "a=train:keras_vgg16"}, 2,
               "needs an inference job with slo_ms=");
  expect_error(with({"share", "--algorithm", "magic", "--power-cap", "150"}, jobs), 2, "--algorithm 'magic'");
  expect_error(with({"share", "--cap-schedule", "5:100"}, jobs), 2, "");
}

// Watching a share (--metrics) or pacing it (--pace) changes none of its results, with or without
// a cap (whose windows are the simulation's own).
TEST(ShareCli, MetricsAndPaceChangeNoResult) {
  for (const std::vector<std::string>& cap : {std::vector<std::string>{}, std::vector<std::string>{"--power-cap", "150"}}) {
    const auto plain = gpucap(with(with(kPair, cap), {"--json"}));
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const auto watched = gpucap(with(with(kPair, cap), {"--json", "--metrics", "127.0.0.1:0", "--pace", "1000"}));
    ASSERT_EQ(watched.exit_code, 0) << watched.err;
    EXPECT_EQ(plain.out, watched.out);
    const auto paced = gpucap(with(with(kPair, cap), {"--json", "--pace", "1000"}));
    ASSERT_EQ(paced.exit_code, 0) << paced.err;
    EXPECT_EQ(plain.out, paced.out);
  }
}

TEST(ShareCli, TheSwitchflowMatricesWriteAReportAndAPlot) {
  test::TempDir dir;
  const auto r = gpucap({"bench", "--matrix", "switchflow-table1", "--out", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("**Independent checks: 8 of 8 within tolerance.**"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("included: 16 of 16 within tolerance"), std::string::npos) << r.out;
  EXPECT_NE(read_text_file(dir.file("report.md")).find("| T1 | vgg16 | transfer ms"), std::string::npos);
  EXPECT_NE(read_text_file(dir.file("paper_vs_twin.svg")).find("<svg"), std::string::npos);
  expect_error({"bench", "--matrix", "switchflow-table1", "--algorithms", "capfit"}, 2, "does not apply");
}

}  // namespace
}  // namespace gpucap
