// Flags that would be taken and then go unused, or give a nonsense result, or fail only after a
// long computation: each is one line and an exit code before anything runs (found by reading the
// docs against the commands as a newcomer would).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_runner.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::expect_error;

TEST(CliRefusals, TheTwinsPredictorTakesOnlyTheGpusMemoryClocks) {
  // It planned "at SM 2100 / mem 1 MHz: 0.3 img/s" before.
  expect_error({"partition", "--model", "resnet50", "--gpu", "3080ti", "--power-cap", "250", "--predictor", "twin", "--mem",
                "1"},
               2, "the GeForce RTX 3080 Ti has no memory clock 1 MHz (it has 405, 810, 5001, 9251, 9501)");
}

TEST(CliRefusals, ATrainingWorkloadIsRefusedWhereverInferenceIsModelled) {
  const std::string refusal = "bert_base_seq128 is a training workload of Zeus's traces";
  test::TempDir dir;
  expect_error({"profile", "--gpu", "p40", "--model", "bert_base_seq128", "--out", dir.file("p.csv")}, 2, refusal);
  expect_error({"tune", "--model", "bert_base_seq128", "--algorithm", "oracle", "--power-cap", "150"}, 2, refusal);
  expect_error({"partition", "--model", "bert_base_seq128", "--gpu", "3080ti", "--power-cap", "250", "--predictor", "twin"},
               2, refusal);
  EXPECT_FALSE(std::filesystem::exists(dir.file("p.csv")));
}

TEST(CliRefusals, PctodlsPredictorTakesItsGpusClocksAndSets) {
  const std::vector<std::string> base = {"predict", "--model", "resnet50", "--p", "50", "--b", "16"};
  expect_error(test::with(base, {"--gpu", "3080ti", "--f", "9999"}), 2,
               "--f 9999 MHz is outside the GeForce RTX 3080 Ti's SM clocks [210, 2100] MHz");
  expect_error(test::with(base, {"--gpu", "a100", "--param-set", "imagenet_mem9501", "--f", "1200"}), 2,
               "--param-set imagenet_mem9501 is fitted at memory clock 9501 MHz, which PctoDL's fits of --gpu a100 do "
               "not have");
  expect_error(test::with(base, {"--gpu", "3080ti", "--param-set", "imagenet_mem9501", "--mem", "5001", "--f", "1200"}),
               2, "--param-set imagenet_mem9501 is fitted at memory clock 9501 MHz, not --mem 5001");
  expect_error(test::with(base, {"--gpu", "p40", "--f", "1200"}), 2, "PctoDL has fits for the RTX 3080 Ti and the A100");
  // The set that matches is taken.
  EXPECT_EQ(test::gpucap(test::with(base, {"--gpu", "3080ti", "--param-set", "imagenet_mem9501", "--f", "1200"})).exit_code,
            0);
}

TEST(CliRefusals, ProfileOnTheTwinRefusesARealGpusFlags) {
  test::TempDir dir;
  expect_error({"profile", "--gpu", "a100", "--model", "resnet50", "--out", dir.file("p.csv"), "--limit", "2", "--device",
                "7"},
               2, "--device does not apply to --platform sim");
}

TEST(CliRefusals, BenchChecksItsFlagsAndItsFolderBeforeItRuns) {
  expect_error({"bench", "--matrix", "serve", "--jobs", "-5"}, 2, "--jobs -5 must be 1 or more");
  expect_error({"bench", "--matrix", "switchflow-h200", "--jobs", "2"}, 2,
               "--jobs, --sample-hz, --bobd-budget, --params, --shadow and --json do not apply to switchflow-h200");
  expect_error({"bench", "--matrix", "switchflow-fig6", "--json"}, 2, "do not apply to switchflow-fig6");
  // The folder is made before the figure runs (one line: nothing was printed before it).
  test::TempDir dir;
  const auto file = dir.write("a-file", "x");
  expect_error({"bench", "--matrix", "switchflow-h200", "--out", file + "/out"}, 4, "cannot create output folder");
}

TEST(CliRefusals, AReportIsTriedBeforeTheFitsRun) {
  // Before, the fits ran (minutes with every source) and then the report could not be written.
  expect_error({"fidelity", "--sources", "published", "--report", "/nonexistent/folder/report.md"}, 4,
               "/nonexistent/folder/report.md: cannot open for writing");
}

// CLI11 said "A subcommand is required" for both.
TEST(CliRefusals, ACommandOfCommandsNamesItsOwn) {
  expect_error({"bso", "bogus"}, 2, "unknown command 'bso bogus'; known: serve, simulate, bench");
  expect_error({"cluster"}, 2, "'cluster' needs one of its commands: coordinate, budget, status, forget, simulate");
  // A missing required option still says so.
  expect_error({"fit", "--model", "x"}, 2, "--profile is required");
}

TEST(CliRefusals, FlagsThatAnotherFlagMakesUnused) {
  expect_error({"run", "--gpu", "p40", "--model", "inception_v1", "--dataset", "imagenet", "--algorithm", "batchdvfs",
                "--power-cap", "131", "--sampler", "nvidia-smi", "--sample-hz", "5"},
               2, "--sample-hz does not apply with --sampler nvidia-smi");
  expect_error({"fidelity", "--sources", "published", "--p40-logs", "/nonexistent"}, 2,
               "--p40-logs is for a source --sources leaves out");
  expect_error({"fidelity", "--sources", "published", "--zeus-traces", "/nonexistent"}, 2,
               "--zeus-traces is for a source --sources leaves out");
  expect_error({"calibrate", "--sources", "published", "--dry-run", "--p40-logs", "/nonexistent"}, 2,
               "--p40-logs is for a source --sources leaves out");
  expect_error({"calibrate", "--sources", "p40", "--dry-run", "--published", "/nonexistent"}, 2,
               "--published is for a source --sources leaves out");
  expect_error({"monitor", "--hostname-label", "Hostname", "--", "true"}, 2,
               "--hostname-label names the host label of --listen's metrics");
  // run's trial lengths are capfit's and bobd's; its MPS round is the MPS planners' (nothing of the
  // GPU or the model file is touched before these refusals).
  const std::vector<std::string> real = {"run", "--platform", "nvml", "--nvml-lib", "/nonexistent/libnvidia-ml.so",
                                         "--model-file", "/nonexistent/model.pt", "--power-cap", "200",
                                         "--duration", "1", "--algorithm", "batchsizer"};
  auto with = [&real](std::initializer_list<std::string> extra) {
    auto argv = real;
    argv.insert(argv.end(), extra);
    return argv;
  };
  expect_error(with({"--trial-measure-s", "1"}), 2, "--trial-warmup-s/--trial-measure-s do not apply to batchsizer");
  expect_error(with({"--mps-round-s", "0.5"}), 2, "--mps-round-s does not apply to batchsizer");
  expect_error({"run", "--gpu", "p40", "--model", "inception_v1", "--algorithm", "batchdvfs", "--power-cap", "131",
                "--mps-round-s", "0.5"},
               2, "--mps-round-s");
}

TEST(CliRefusals, BoundsThatKeepATypoFromRunningForever) {
  expect_error({"bso", "simulate", "--workload", "librispeech/deepspeech2", "--recurrences", "100000000"}, 2,
               "--recurrences 100000000 must be between 1 and 100000");
  // A lease etcd would refuse at every try: the coordinator would retry without ever leading.
  expect_error({"cluster", "coordinate", "--etcd", "http://127.0.0.1:1", "--cluster", "c", "--lease-ttl", "1e12"}, 2,
               "must be at most 1e+06 s (the longest lease etcd grants here)");
}

TEST(CliRefusals, ShareRefusesTheOtherPlatformsFlags) {
  const std::vector<std::string> twin = {"share", "--job", "a=train:keras_vgg16:steps=3"};
  expect_error(test::with(twin, {"--threads", "7"}), 2, "--threads does not apply to --platform twin");
  expect_error(test::with(twin, {"--device", "cuda:3"}), 2, "--device does not apply to --platform twin");
  expect_error(test::with(twin, {"--policy", "threads", "--resume"}), 2,
               "--resume is how switchflow resumes a preempted job; policy threads preempts none");
  expect_error(test::with(twin, {"--window", "5"}), 2, "--window is the window a power cap is judged over");
  expect_error({"share", "--platform", "torch", "--model-dir", ".", "--job", "a=train:resnet18", "--max-time", "5"}, 2,
               "--max-time does not apply to --platform torch");
  // `sim`, other commands' name for the twin, runs it.
  EXPECT_EQ(test::gpucap(test::with(twin, {"--platform", "sim"})).exit_code, 0);
}

TEST(CliRefusals, BsoBenchTakesItsSixWorkloadsOnceEach) {
  expect_error({"bso", "bench", "--workload", "nope/x"}, 2,
               "--workload 'nope/x' is not one of the six bso bench runs");
  expect_error({"bso", "bench", "--workload", "librispeech/deepspeech2", "--workload", "librispeech/deepspeech2"}, 2,
               "--workload librispeech/deepspeech2 is given twice");
  expect_error({"bso", "bench", "--optimizers", "zeus,zeus"}, 2, "--optimizers 'zeus,zeus' lists zeus twice");
  expect_error({"bso", "bench", "--seeds", "1,,2"}, 2, "--seeds '1,,2': '' is not a seed");
  expect_error({"bso", "bench", "--seeds", "1,2,1"}, 2, "--seeds '1,2,1' lists 1 twice");
}

}  // namespace
}  // namespace gpucap
