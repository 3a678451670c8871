// End-to-end tests of the gpucap binary: outputs, exit codes, and one clear line on stderr for
// every kind of bad input.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "support/cli_runner.hpp"
#include "support/paths.hpp"
#include "support/scoped_env.hpp"


namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;
using test::quote;
using test::with;

const std::vector<std::string> kRun = {"run", "--gpu", "p40", "--model", "inception_v1", "--dataset", "imagenet",
                                       "--algorithm", "batchdvfs"};

TEST(Cli, HelpAndVersion) {
  const auto help = gpucap({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("run"), std::string::npos);
  EXPECT_NE(help.out.find("replay"), std::string::npos);
  EXPECT_EQ(gpucap({"run", "--help"}).exit_code, 0);
  EXPECT_EQ(gpucap({"--version"}).exit_code, 0);
}

TEST(Cli, RunPrintsALabelledSummaryAndWritesATrace) {
  test::TempDir dir;
  const auto trace = dir.file("trace.csv");
  const auto r = gpucap(with(kRun, {"--power-cap", "131", "--trace", trace}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("SIMULATED Tesla P40"), std::string::npos);
  for (const char* label : {"images", "duration", "throughput", "energy", "images per joule", "windows over cap",
                            "time over cap", "mean power", "max power"}) {
    const auto at = r.out.find(std::string("  ") + label);
    ASSERT_NE(at, std::string::npos) << label;
    const auto line_end = r.out.find('\n', at);
    EXPECT_NE(r.out.substr(at, line_end - at).find("[simulated]"), std::string::npos) << label;
  }
  const auto text = read_text_file(trace);
  const auto lines = split(text, '\n');
  ASSERT_GT(lines.size(), 3u);
  EXPECT_EQ(std::string(lines[0]).rfind("time_s,window_start_s,cap_w,window_max_w,window_mean_w", 0), 0u);
  EXPECT_NE(std::string(lines[1]).find(",sim"), std::string::npos);
}

TEST(Cli, RunJsonIsMachineReadable) {
  const auto r = gpucap(with(kRun, {"--cap-schedule", "0:150,5:100", "--images", "5000", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_TRUE(json["simulated"].get<bool>());
  EXPECT_EQ(json["images"], 5000);
  EXPECT_EQ(json["cap"], "0:150,5:100");
  EXPECT_GT(json["throughput_img_s"].get<double>(), 0.0);
}

TEST(Cli, AutotuningEachNewBatchSizeCostsThroughput) {
  const auto run = [](const std::vector<std::string>& more) {
    const auto r = gpucap(with(kRun, with({"--power-cap", "150", "--images", "5000", "--json"}, more)));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto plain = run({});
  const auto tuned = run({"--autotune-new-shapes"});
  EXPECT_FALSE(plain["autotune_new_shapes"].get<bool>());
  EXPECT_TRUE(tuned["autotune_new_shapes"].get<bool>());
  EXPECT_LT(tuned["throughput_img_s"].get<double>(), plain["throughput_img_s"].get<double>());
}

TEST(Cli, TheBatchDvfsHarnesssSamplerSlowsShortBatchesAndSamplesAFewTimesASecond) {
  const auto run = [](const std::vector<std::string>& more) {
    const auto r = gpucap(with({"run", "--model", "inception_v4", "--algorithm", "dvfs", "--batch", "1", "--power-cap",
                                "250", "--images", "600", "--input-pipeline", "serial", "--json"},
                               more));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto plain = run({});
  const auto harness = run({"--sampler", "nvidia-smi"});
  EXPECT_EQ(plain["sampler"], "fixed");
  EXPECT_EQ(harness["sampler"], "nvidia-smi");
  // Batch 1 of Inception-V4 (job 4 of the BatchDVFS matrix logged 9.3 img/s): its processes stall
  // about every other batch, and most windows wait 1 s for their first reading.
  EXPECT_LT(harness["throughput_img_s"].get<double>(), 0.7 * plain["throughput_img_s"].get<double>());
  EXPECT_GT(harness["throughput_img_s"].get<double>(), 0.3 * plain["throughput_img_s"].get<double>());
}

TEST(Cli, AGovernorClockHoldsAnUncontrolledRunThere) {
  test::TempDir dir;
  const auto trace = dir.file("trace.csv");
  const auto r = gpucap({"run", "--model", "inception_v3", "--algorithm", "clipper", "--power-cap", "200", "--duration",
                         "12", "--governor-clock", "1300", "--trace", trace});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(", governor at 1303 MHz"), std::string::npos) << r.out;
  const auto json = gpucap({"run", "--model", "inception_v3", "--algorithm", "clipper", "--power-cap", "200",
                            "--duration", "3", "--governor-clock", "1300", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["governor_clock_mhz"], 1303.0);
  const auto text = read_text_file(trace);
  const auto lines = split(text, '\n');
  ASSERT_GT(lines.size(), 3u);
  const auto header = split(lines[0], ',');
  const auto column = std::find(header.begin(), header.end(), "sm_clock_mhz") - header.begin();
  ASSERT_LT(column, static_cast<std::ptrdiff_t>(header.size()));
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    EXPECT_EQ(split(lines[i], ',').at(static_cast<std::size_t>(column)), "1303") << "snapped to a P40 clock";
  }
}

TEST(Cli, RunRejectsBadInput) {
  expect_error({"run", "--gpu", "k80", "--model", "resnet50", "--algorithm", "batchdvfs", "--power-cap", "131"}, 2,
               "unknown GPU 'k80'");
  expect_error({"run", "--model", "resnet18", "--algorithm", "batchdvfs", "--power-cap", "100"}, 2,
               "unknown model 'resnet18'");
  expect_error({"run", "--model", "resnet50", "--algorithm", "pid", "--power-cap", "100"}, 2,
               "unknown algorithm 'pid'");
  expect_error(with(kRun, {"--power-cap", "5"}), 2, "power cap 5 W is outside");
  expect_error(with(kRun, {"--power-cap", "300"}), 2, "power cap 300 W is outside");
  expect_error(with(kRun, {"--cap-schedule", "0:150,abc"}), 2, "cap schedule entry 'abc'");
  expect_error(with(kRun, {"--cap-schedule", "0:150,50:120,40:100"}), 2, "times must increase");
  expect_error(kRun, 2, "--power-cap");
  expect_error(with(kRun, {"--power-cap", "abc"}), 2, "--power-cap");
  expect_error(with(kRun, {"--power-cap", "131", "--alpha", "2"}), 2, "--alpha 2 must be in (0, 1]");
  expect_error(with(kRun, {"--power-cap", "131", "--window", "soon"}), 2, "window 'soon'");
  expect_error(with(kRun, {"--power-cap", "131", "--images", "0"}), 2, "--images");
  expect_error({"run", "--model", "resnet50", "--dataset", "coco", "--algorithm", "batchdvfs", "--power-cap", "131"},
               2, "unknown dataset 'coco'");
  expect_error(with(kRun, {"--power-cap", "131", "--precision", "int4"}), 2, "--precision");
  expect_error({"run", "--algorithm", "batchdvfs"}, 2, "--model");
  expect_error(with(kRun, {"--power-cap", "131", "--sampler", "nvml"}), 2, "--sampler 'nvml' must be fixed or nvidia-smi");
  expect_error({"run", "--gpu", "a100", "--model", "resnet50", "--algorithm", "mpsfit", "--power-cap", "200", "--sampler",
                "nvidia-smi"},
               2, "one process at 100 %; mpsfit runs MPS tenants");
  expect_error(with(kRun, {"--power-cap", "131", "--governor-clock", "2000"}), 2,
               "governor SM clock 2000 MHz is outside p40's 544-1531 MHz");
  expect_error(with(kRun, {"--power-cap", "131", "--governor-clock", "fast"}), 2, "--governor-clock");
  expect_error({"run", "--gpu", "a100", "--model", "resnet50", "--algorithm", "mpsfit", "--power-cap", "200",
                "--governor-clock", "1000"},
               2, "a governor SM clock applies to one process; mpsfit runs MPS tenants");
  expect_error({"frobnicate"}, 2, "unknown command 'frobnicate'");
  // capfit's --profile: one measured for another model is refused by its difference.
  test::TempDir dir;
  const auto resnet = dir.write("resnet50.json", R"({"simulated": true, "gpu": "a100", "model": "resnet50", "trials": [
    {"batch_size": 1, "sm_clock_mhz": 1410, "memory_clock_mhz": null, "throughput_img_s": 100, "max_power_w": 100}]})");
  expect_error({"run", "--gpu", "a100", "--model", "vgg19", "--algorithm", "capfit", "--power-cap", "200", "--profile", resnet},
               2,
               "--profile " + resnet + ": it was measured with model resnet50, and this runs vgg19; measure this one's with "
               "'gpucap tune --gpu a100 --model vgg19 --algorithm oracle --power-cap W --json'");
}

// What a newcomer's slips get: one line that names what they typed, exit code 2.
TEST(Cli, ANewcomersSlipsGetOneLineNamingWhatWasTyped) {
  // A mistyped command with --help is not the top-level help and exit 0.
  const auto typo = gpucap({"nosuchcommand", "--help"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("unknown command 'nosuchcommand'"), std::string::npos) << typo.err;
  EXPECT_EQ(typo.out.find("Usage"), std::string::npos) << typo.out;
  EXPECT_EQ(gpucap({"run", "--help"}).exit_code, 0);
  EXPECT_EQ(gpucap({"list", "--help"}).exit_code, 0);
  // A negative cap is a bad --power-cap, not a step of a schedule nobody gave.
  const auto negative = gpucap(with(kRun, {"--power-cap", "-50"}));
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--power-cap -50: must be a positive number of watts"), std::string::npos) << negative.err;
  EXPECT_EQ(negative.err.find("schedule"), std::string::npos) << negative.err;
  expect_error({"share", "--job", "a=train:keras_vgg16", "--algorithm", "capshare", "--power-cap", "0"}, 2,
               "--power-cap 0: must be a positive number of watts");
  expect_error({"share", "--job", "a=train:keras_vgg16", "--window", "-1"}, 2, "must be a positive number, not '-1'");
  // A missing data folder is named as it was given.
  {
    const test::ScopedEnv data("GPUCAP_DATA_DIR", "/nonexistent/data");
    const auto r = test::gpucap_without_data_dir(with(kRun, {"--power-cap", "131"}));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("$GPUCAP_DATA_DIR '/nonexistent/data': no such folder"), std::string::npos) << r.err;
  }
  // An option given twice names the option.
  expect_error(with(kRun, {"--power-cap", "131", "--power-cap", "120"}), 2, "--power-cap was given more than once");
  // A training workload of Zeus's traces is not run as inference without a word.
  expect_error({"run", "--gpu", "v100", "--model", "bert_base_seq128", "--algorithm", "batchsizer", "--power-cap", "200"}, 2,
               "bert_base_seq128 is a training workload of Zeus's traces");
  expect_error(with(kRun, {"--power-cap", "131", "--hostname-label", "HOSTNAME"}), 2, "--hostname-label 'HOSTNAME'");
}

// --metrics on the twin without --pace: the run goes ahead, and stderr says why a scraper sees little.
TEST(Cli, AnUnpacedTwinRunWithMetricsSaysItEndsInMoments) {
  const auto r = gpucap(with(kRun, {"--power-cap", "131", "--images", "200", "--metrics", "127.0.0.1:0"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("without --pace this run ends in moments"), std::string::npos) << r.err;
  const auto paced = gpucap(with(kRun, {"--power-cap", "131", "--images", "200", "--metrics", "127.0.0.1:0", "--pace", "1000"}));
  ASSERT_EQ(paced.exit_code, 0) << paced.err;
  EXPECT_EQ(paced.err.find("without --pace"), std::string::npos) << paced.err;
}

TEST(Cli, RunRejectsValuesThatWouldNeverEndOrExhaustMemory) {
  const std::vector<std::string> base = {"run", "--model", "inception_v1", "--algorithm", "dvfs", "--power-cap", "131"};
  expect_error(with(base, {"--sample-hz", "1e9"}), 2, "sampling rate");
  expect_error(with(base, {"--sample-hz", "0.001"}), 2, "sampling rate");
  expect_error(with(base, {"--batch", "1000000000"}), 2, "--batch 1000000000");
  expect_error(with(base, {"--duration", "inf"}), 2, "duration");
  expect_error(with(base, {"--duration", "nan"}), 2, "duration");
  expect_error(with(base, {"--duration", "1e12"}), 2, "duration");
  expect_error(with(base, {"--images", "99999999999999999999"}), 2, "--images");
  expect_error(with(base, {"--images", "1000000000"}), 2, "--images must be between 1 and 100000000");
  expect_error(with(base, {"--window", "1e308"}), 2, "window");
  expect_error(with(base, {"--window", "1000001b"}), 2, "between 1 and 1000000");
  expect_error(with(base, {"--seed", "-1"}), 2, "--seed '-1'");
  expect_error(with(base, {"--seed", "99999999999999999999999"}), 2, "--seed");
  expect_error({"run", "--model", "inception_v1", "--algorithm", "dvfs", "--power-cap", "500", "--cap-schedule",
                "0:150,85:125"},
               2, "--power-cap only sets the cap before the first step");
  expect_error({"run", "--model", "inception_v1", "--algorithm", "dvfs", "--power-cap", "20"}, 2,
               "power cap 20 W is outside what the Tesla P40 can draw with a model loaded");
}

TEST(Cli, GlobalOptionsMayFollowTheCommand) {
  const auto status = std::system(
      (quote(GPUCAP_CLI_PATH) + " list gpus --data-dir " + quote(test::data_dir()) + " > /dev/null").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Cli, OutputThatCannotBeWrittenIsAnError) {
  const auto status = std::system((quote(GPUCAP_CLI_PATH) + " --data-dir " + quote(test::data_dir()) +
                                   " list gpus > /dev/full 2>/dev/null")
                                      .c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 4);
}

TEST(Cli, UnwritableTraceIsAnIoErrorAndNothingRuns) {
  expect_error(with(kRun, {"--power-cap", "131", "--trace", "/nonexistent/dir/t.csv"}), 4, "/nonexistent/dir/t.csv");
  // Validation comes first: a bad model never creates the trace file.
  test::TempDir dir;
  const auto trace = dir.file("t.csv");
  expect_error({"run", "--model", "nope", "--algorithm", "batchdvfs", "--power-cap", "100", "--trace", trace}, 2,
               "unknown model");
  EXPECT_FALSE(std::filesystem::exists(trace));
}

TEST(Cli, ReplayPrintsStepsAndTheMatchLine) {
  const auto log = test::shared_file("batchdvfs-p40/batchdvfs/01_InceptionV1_BatchDVFS.csv");
  const auto r = gpucap({"replay", "--algorithm", "batchdvfs", "--trace", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "step,time_s,power_w,cap_w,logged_batch,batch,logged_clock_mhz,clock_mhz,match");
  const auto last = r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
  EXPECT_EQ(last.rfind("match ", 0), 0u) << last;
  EXPECT_NE(last.find("(64/64)"), std::string::npos) << last;
  const auto json = gpucap({"replay", "--algorithm", "batchdvfs", "--trace", log, "--json"});
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(json.out)["total"], 64);
}

TEST(Cli, ReplayAFolderGivesOneRowPerFileAndThePooledLine) {
  const auto dir = test::shared_file("batchdvfs-p40/clipper");
  const auto r = gpucap({"replay", "--algorithm", "clipper", "--trace-dir", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = split(r.out, '\n');
  ASSERT_EQ(lines.size(), 23u);  // header, 20 files, pooled line, final newline
  EXPECT_EQ(std::string(lines[0]),
            "file,algorithm,steps,matched,match_pct,log_held,log_changed_no_window,log_changed_in_band,"
            "different_change");
  EXPECT_EQ(std::string(lines[1]).rfind("01_InceptionV1_Clipper.csv,clipper,", 0), 0u);
  EXPECT_EQ(std::string(lines[21]).rfind("match ", 0), 0u);
  const auto json = nlohmann::json::parse(gpucap({"replay", "--algorithm", "clipper", "--trace-dir", dir, "--json"}).out);
  EXPECT_EQ(json["files"].size(), 20u);
  EXPECT_GE(json["match_pct"].get<double>(), 99.0);
}

TEST(Cli, ReplayRejectsBadInput) {
  test::TempDir dir;
  const auto bad = dir.write("bad.csv", "time stamp, Througput (image/sec), power cap, power, batch size, DVFS\n"
                                        "1.0,2.0,131,xx,256,1063\n");
  expect_error({"replay", "--algorithm", "dvfs", "--trace", bad}, 3, bad + ":2: column 4 (power)");
  expect_error({"replay", "--algorithm", "batchdvfs", "--trace", bad}, 3, "missing column 'minBS'");
  expect_error({"replay", "--algorithm", "dvfs", "--trace", "/nonexistent.csv"}, 4, "/nonexistent.csv");
  expect_error({"replay", "--algorithm", "pid", "--trace", bad}, 2, "replay supports batchdvfs, clipper and dvfs");
  expect_error({"replay", "--algorithm", "dvfs"}, 2, "--trace FILE or --trace-dir DIR");
  expect_error({"replay", "--algorithm", "dvfs", "--trace", bad, "--trace-dir", dir.path()}, 2, "excludes");
  test::TempDir empty;
  expect_error({"replay", "--algorithm", "dvfs", "--trace-dir", empty.path()}, 3, "no .csv logs");
  const auto good = test::shared_file("batchdvfs-p40/dvfs256/01_InceptionV1_DVFS.csv");
  expect_error({"replay", "--algorithm", "dvfs", "--trace", good, "--window", "-1"}, 2, "--window -1");
  expect_error({"replay", "--algorithm", "dvfs", "--trace", good, "--window", "inf"}, 2, "--window inf");
  expect_error({"replay", "--algorithm", "dvfs", "--trace", good, "--clock-levels", "1063,544"}, 2,
               "strictly increasing");
  const auto clipper = test::shared_file("batchdvfs-p40/clipper/01_InceptionV1_Clipper.csv");
  expect_error({"replay", "--algorithm", "clipper", "--trace", clipper, "--clock-levels", "1,2"}, 2,
               "does not apply to clipper");
  expect_error({"replay", "--algorithm", "dvfs", "--trace", dir.path()}, 4, "not a regular file");
  expect_error({"replay", "--algorithm", "dvfs", "--trace", "/dev/zero"}, 4, "not a regular file");
  const auto crlf = dir.write("crlf.csv", "time stamp, Througput (image/sec), power cap, power, batch size, DVFS\r\n"
                                          "1.0,2.0,131,120,256,1063\r\n5.0,2.0,131,120,256,1063\r\n");
  EXPECT_EQ(gpucap({"replay", "--algorithm", "dvfs", "--trace", crlf}).exit_code, 0);
}

TEST(Cli, ListsWhatItKnows) {
  const auto gpus = gpucap({"list", "gpus"});
  ASSERT_EQ(gpus.exit_code, 0);
  for (const char* id : {"p40", "v100", "a100", "rtx3080ti", "h100", "h200", "v100-pcie", "rtx6000", "p100", "a40"}) {
    EXPECT_NE(gpus.out.find(id), std::string::npos) << id;
  }
  const auto models = nlohmann::json::parse(gpucap({"list", "models", "--json"}).out);
  EXPECT_EQ(models.size(), 28u);
  const auto algorithms = nlohmann::json::parse(gpucap({"list", "algorithms", "--json"}).out);
  EXPECT_EQ(algorithms.size(), 12u);
  EXPECT_EQ(gpucap({"list", "datasets"}).exit_code, 0);
  const auto matrices = gpucap({"list", "matrices"}).out;
  for (const char* id : {"batchdvfs-p40", "pctodl-3080ti", "pctodl-a100"}) {
    EXPECT_NE(matrices.find(id), std::string::npos) << id;
  }
  expect_error({"list", "widgets"}, 2, "widgets");
}

TEST(Cli, BenchWritesACompleteResultSet) {
  test::TempDir dir;
  const auto matrix = dir.write("m.json", R"({"id": "tiny", "gpu": "p40", "jobs": [
      {"id": "1", "model": "inception_v1", "dataset": "imagenet", "cap_w": 131, "images": 2000},
      {"id": "2", "model": "resnet_v2_50", "dataset": "imagenet", "cap_w": 100, "images": 2000}]})");
  const auto out = dir.file("out");
  const auto r = gpucap({"bench", "--matrix", matrix, "--algorithms", "batchdvfs,clipper", "--out", out, "--jobs", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5) << r.out;
  for (const char* file : {"summary.csv", "summary.json", "report.md", "traces/1-batchdvfs.csv", "traces/2-clipper.csv"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + file)) << file;
  }
  EXPECT_EQ(read_text_file(out + "/summary.csv"), r.out);
}

TEST(Cli, BenchRejectsBadInput) {
  expect_error({"bench", "--matrix", "mlperf"}, 2, "unknown matrix 'mlperf'");
  expect_error({"bench", "--matrix", "batchdvfs-p40", "--algorithms", "batchdvfs,nope"}, 2, "unknown algorithm 'nope'");
  expect_error({"bench", "--matrix", "batchdvfs-p40", "--jobs", "0"}, 2, "--jobs 0");
  expect_error({"bench", "--matrix", "batchdvfs-p40", "--bobd-budget", "0"}, 2, "--bobd-budget 0");
  test::TempDir dir;
  const auto bad = dir.write("bad.json", R"({"id": "x", "gpu": "p40", "jobs": [{"id": "1"}]})");
  expect_error({"bench", "--matrix", bad}, 3, "missing key 'jobs[0].model'");
  expect_error({"bench", "--matrix", "batchdvfs-p40", "--out", "/proc/gpucap-out"}, 4, "/proc/gpucap-out");
  // Rejected input leaves no output folder behind.
  const auto out = dir.file("never");
  expect_error({"bench", "--matrix", "batchdvfs-p40", "--jobs", "0", "--out", out}, 2, "--jobs 0");
  expect_error({"bench", "--matrix", "batchdvfs-p40", "--sample-hz", "0", "--out", out}, 2, "sampling rate");
  EXPECT_FALSE(std::filesystem::exists(out));
  const auto escape = dir.write("escape.json", R"({"id": "x", "gpu": "p40", "jobs": [
      {"id": "../../evil", "model": "inception_v1", "dataset": "imagenet", "cap_w": 131}]})");
  expect_error({"bench", "--matrix", escape, "--out", out}, 3, "may only contain letters");
}

TEST(Cli, RunBobdSearchesOnTheTwinBeforeTheRunAndHoldsWhatItFound) {
  const std::vector<std::string> run = {"run",         "--model", "inception_v1", "--power-cap", "131",
                                        "--algorithm", "bobd",    "--images",     "3000",        "--json"};
  const auto r = gpucap(with(run, {"--bobd-budget", "12"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["algorithm"], "bobd");
  EXPECT_EQ(json["images"], 3000);
  EXPECT_GT(json["throughput_img_s"].get<double>(), 0.0);
  expect_error(with(run, {"--bobd-budget", "0"}), 2, "--bobd-budget 0");
  expect_error({"run", "--model", "inception_v1", "--power-cap", "131", "--algorithm", "batchdvfs", "--bobd-budget",
                "5"},
               2, "--bobd-budget does not apply to batchdvfs");
  expect_error(with(run, {"--alpha", "0.9"}), 2, "--alpha does not apply to bobd");
}

TEST(Cli, DevicesListsNvidiaGpusThroughNvmlOrSaysThereIsNoDriver) {
  expect_error({"devices", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1"}, 8,
               "no NVIDIA driver: cannot load /nonexistent/libnvidia-ml.so.1");
  test::TempDir dir;
  const auto state = dir.write("nvml.json", R"({"devices": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-abc",
      "bus_id": "00000000:19:00.0", "power_mw": 70000, "power_limit_mw": 700000, "power_limit_min_mw": 200000,
      "power_limit_max_mw": 700000, "power_limit_default_mw": 700000, "memory_clocks_mhz": [2619],
      "graphics_clocks_mhz": [1980, 1755, 1410, 345], "sm_clock_mhz": 345, "memory_clock_mhz": 2619}]})");
  setenv("GPUCAP_FAKE_NVML_STATE", state.c_str(), 1);
  const auto text = gpucap({"devices", "--nvml-lib", GPUCAP_FAKE_NVML_PATH});
  const auto json = gpucap({"devices", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--json"});
  unsetenv("GPUCAP_FAKE_NVML_STATE");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("GPU 0: NVIDIA H100 80GB HBM3"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("settable 200-700 W"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("345-1980 MHz (4 levels)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("nothing simulated"), std::string::npos) << text.out;
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto parsed = nlohmann::json::parse(json.out);
  ASSERT_EQ(parsed["devices"].size(), 1u);
  EXPECT_EQ(parsed["devices"][0]["uuid"], "GPU-abc");
  EXPECT_EQ(parsed["devices"][0]["power_limit_w"]["min"], 200.0);
  EXPECT_FALSE(parsed["devices"][0]["simulated"].get<bool>());
  EXPECT_FALSE(parsed["devices"][0]["energy_counter"].get<bool>());
  EXPECT_TRUE(parsed["devices"][0]["writable"].contains("GPU_POWER_LIMIT_CONTROL"));
}

// Starts the crash test's victim with stdout on a pipe; returns its pid once it says "applied".
pid_t start_holding_gpu_settings(const std::string& nvml_library) {
  int out[2];
  if (pipe(out) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl(GPUCAP_HOLD_GPU_SETTINGS_PATH, GPUCAP_HOLD_GPU_SETTINGS_PATH, nvml_library.c_str(), nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string said;
  char c = 0;
  while (said.find("applied") == std::string::npos && read(out[0], &c, 1) == 1) said += c;
  close(out[0]);
  return said.find("applied") != std::string::npos ? pid : -1;
}

TEST(Cli, SettingsOfAKilledProcessAreRestoredByTheNextGpucapStart) {
  test::TempDir dir;
  const auto state = dir.write("nvml.json", R"({"devices": [{"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-crash",
      "bus_id": "00000000:07:00.0", "power_mw": 90000, "power_limit_mw": 400000, "power_limit_min_mw": 100000,
      "power_limit_max_mw": 400000, "power_limit_default_mw": 400000, "memory_clocks_mhz": [1215],
      "graphics_clocks_mhz": [1410, 1200, 1005, 810], "sm_clock_mhz": 1410, "memory_clock_mhz": 1215,
      "locked_sm_mhz": null}]})");
  const auto journal = dir.file("journal/restore-journal.json");
  setenv("GPUCAP_FAKE_NVML_STATE", state.c_str(), 1);
  setenv("GPUCAP_RESTORE_JOURNAL", journal.c_str(), 1);
  const pid_t victim = start_holding_gpu_settings(GPUCAP_FAKE_NVML_PATH);
  ASSERT_GT(victim, 0) << "the victim did not change the settings";
  kill(victim, SIGKILL);
  int status = 0;
  waitpid(victim, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto gpu = nlohmann::json::parse(read_text_file(state))["devices"][0];
  EXPECT_EQ(gpu["locked_sm_mhz"], nlohmann::json({1005, 1005})) << "killed: nothing was restored";
  EXPECT_EQ(gpu["power_limit_mw"], 250000);
  ASSERT_TRUE(std::filesystem::exists(journal));

  // gpucap monitor only reads: it leaves the settings and the journal as they are.
  setenv("GPUCAP_NVML_LIB", GPUCAP_FAKE_NVML_PATH, 1);
  const auto monitored = gpucap({"monitor", "--", "true"});
  EXPECT_EQ(monitored.exit_code, 0) << monitored.err;
  EXPECT_EQ(monitored.err.find("restored"), std::string::npos) << monitored.err;
  EXPECT_EQ(nlohmann::json::parse(read_text_file(state))["devices"][0]["power_limit_mw"], 250000);
  EXPECT_TRUE(std::filesystem::exists(journal));

  // The next start of gpucap, whatever other command, puts everything back.
  const auto next = gpucap({"list", "gpus"});
  unsetenv("GPUCAP_NVML_LIB");
  unsetenv("GPUCAP_RESTORE_JOURNAL");
  unsetenv("GPUCAP_FAKE_NVML_STATE");
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_NE(next.err.find("restored GPU_POWER_LIMIT_CONTROL on GPU GPU-crash to 400 W"), std::string::npos)
      << next.err;
  EXPECT_NE(next.err.find("restored GPU_CORE_FREQUENCY_LOCK_CONTROL on GPU GPU-crash to its default"),
            std::string::npos)
      << next.err;
  gpu = nlohmann::json::parse(read_text_file(state))["devices"][0];
  EXPECT_TRUE(gpu["locked_sm_mhz"].is_null());
  EXPECT_EQ(gpu["power_limit_mw"], 400000);
  EXPECT_FALSE(std::filesystem::exists(journal)) << "nothing left to restore";
}

}  // namespace
}  // namespace gpucap
