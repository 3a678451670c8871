// End-to-end tests of `gpucap tune --algorithm bobd`: progress lines, JSON trials, defaults and
// errors. (A small runner of its own: cli_test.cpp keeps its helpers file-local.)

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "gpucap/core/files.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Output gpucap_tune(const std::vector<std::string>& args) {
  test::TempDir dir;
  // Arguments here are plain words and numbers, so single quotes suffice.
  std::string command = std::string("'") + GPUCAP_CLI_PATH + "' --data-dir '" + test::data_dir() + "' tune";
  for (const auto& arg : args) command += " '" + arg + "'";
  command += " >'" + dir.file("out") + "' 2>'" + dir.file("err") + "'";
  const int status = std::system(command.c_str());
  return Output{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text_file(dir.file("out")),
                read_text_file(dir.file("err"))};
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  }
  return found;
}

const std::vector<std::string> kBobd = {"--algorithm", "bobd", "--model", "inception_v1", "--power-cap", "131"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

TEST(CliTuneBobd, PrintsOneBestSoFarLinePerEvaluationThenTheSummary) {
  const auto r = gpucap_tune(with(kBobd, {"--budget", "12"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gpucap tune (bobd) on the SIMULATED Tesla P40"), std::string::npos) << r.out;
  const auto evaluations = lines_starting(r.out, "  eval ");
  ASSERT_EQ(evaluations.size(), 12u) << r.out;
  EXPECT_EQ(evaluations.front().rfind("  eval   1  batch=", 0), 0u) << evaluations.front();
  for (const auto& line : evaluations) {
    EXPECT_NE(line.find(" best "), std::string::npos) << line;
    EXPECT_NE(line.find("[simulated]"), std::string::npos) << line;
    EXPECT_TRUE(line.find("feasible") != std::string::npos || line.find("over cap") != std::string::npos) << line;
  }
  EXPECT_NE(r.out.find("12 of 2560"), std::string::npos) << r.out;
  EXPECT_EQ(lines_starting(r.out, "  best configuration").size(), 1u) << r.out;
  EXPECT_NE(r.out.find("search cost"), std::string::npos);
}

TEST(CliTuneBobd, JsonHasFiftyTrialsByDefaultWithARunningBest) {
  const auto r = gpucap_tune(with(kBobd, {"--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["algorithm"], "bobd");
  EXPECT_EQ(json["budget"], 50);
  EXPECT_EQ(json["evaluations"], 50);
  ASSERT_EQ(json["trials"].size(), 50u);
  double running = 0.0;
  for (const auto& trial : json["trials"]) {
    if (trial["max_power_w"].get<double>() <= 131.0) {
      running = std::max(running, trial["throughput_img_s"].get<double>());
    }
    if (running == 0.0) {
      EXPECT_TRUE(trial["best_so_far_img_s"].is_null());
    } else {
      EXPECT_DOUBLE_EQ(trial["best_so_far_img_s"].get<double>(), running);
    }
  }
  ASSERT_FALSE(json["best"].is_null());
  EXPECT_DOUBLE_EQ(json["best"]["throughput_img_s"].get<double>(), running);
  EXPECT_LE(json["best"]["max_power_w"].get<double>(), 131.0);
  // The oracle keeps its whole-space default.
  const auto oracle = gpucap_tune({"--algorithm", "oracle", "--model", "inception_v1", "--power-cap", "131",
                                   "--clock-levels", "1063", "--json"});
  ASSERT_EQ(oracle.exit_code, 0) << oracle.err;
  EXPECT_EQ(nlohmann::json::parse(oracle.out)["evaluations"], 256);
}

TEST(CliTuneBobd, TheSeedChangesTheDesignAndTheSameSeedRepeatsIt) {
  const auto first = gpucap_tune(with(kBobd, {"--budget", "3", "--seed", "5", "--json"}));
  const auto again = gpucap_tune(with(kBobd, {"--budget", "3", "--seed", "5", "--json"}));
  const auto other = gpucap_tune(with(kBobd, {"--budget", "3", "--seed", "6", "--json"}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, again.out);
  // The design's points, not the measurements (the seed also changes the twin's noise).
  const auto design = [](const std::string& out) {
    std::vector<std::pair<int, double>> points;
    const auto json = nlohmann::json::parse(out);
    for (const auto& t : json["trials"]) {
      points.emplace_back(t["batch_size"].get<int>(), t["sm_clock_mhz"].get<double>());
    }
    points.resize(2);
    return points;
  };
  EXPECT_NE(design(first.out), design(other.out));
}

TEST(CliTuneBobd, RejectsBadInputWithOneLineAndExitCode2) {
  const auto expect_usage_error = [](const std::vector<std::string>& args, const std::string& fragment) {
    const auto r = gpucap_tune(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  };
  expect_usage_error(with(kBobd, {"--budget", "0"}), "--budget 0");
  expect_usage_error({"--algorithm", "annealing", "--model", "inception_v1", "--power-cap", "131"},
                     "available: oracle, bobd");
  expect_usage_error(with(kBobd, {"--clock-levels", "1000.5"}), "does not support the SM clock");
}

}  // namespace
}  // namespace gpucap
