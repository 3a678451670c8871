// gpucap cluster simulate end to end: the issue's JSON keys with sane values, the text table, and
// bad input refused with exit 2 and one line.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "support/cli_runner.hpp"

namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;

const std::vector<std::string> kSmall = {"cluster", "simulate", "--nodes", "30", "--budget", "70%", "--seed", "2",
                                         "--duration", "90"};

TEST(ClusterSimulateCli, TheJsonHasTheIssuesKeysWithSaneValues) {
  const auto r = gpucap(test::with(kSmall, {"--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["platform"], "simulated");
  EXPECT_EQ(j["nodes"], 30);
  EXPECT_EQ(j["policy"], "gpucap");
  EXPECT_EQ(j["budget_violations"], 0);
  EXPECT_GT(j["throughput"].get<double>(), 0.0);
  EXPECT_GE(j["max_realloc_s"].get<double>(), 0.0);
  EXPECT_LT(j["max_realloc_s"].get<double>(), 60.0);
  const auto& b = j["baselines"];
  for (const char* key : {"equal_split", "tdp_proportional", "power_balancer", "optimum"}) {
    ASSERT_TRUE(b.contains(key)) << key;
    EXPECT_GT(b[key].get<double>(), 0.0) << key;
    EXPECT_LE(b[key].get<double>(), b["optimum"].get<double>() * 1.01) << key;
  }
  EXPECT_LE(j["throughput"].get<double>(), b["optimum"].get<double>() * 1.01);
  EXPECT_NEAR(j["budget_w"].get<double>(), 0.7 * j["sum_tdp_w"].get<double>(), 1e-6);
}

TEST(ClusterSimulateCli, WattsAPolicyAndBudgetStepsAreTaken) {
  const auto r = gpucap({"cluster", "simulate", "--nodes", "20", "--budget", "3000W", "--policy", "balancer",
                         "--duration", "90", "--budget-step", "40=2100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["policy"], "balancer");
  EXPECT_EQ(j["budget_w"], 3000.0);
  EXPECT_EQ(j["throughput"], j["baselines"]["power_balancer"]);
  EXPECT_EQ(j["budget_violations"], 0);
}

TEST(ClusterSimulateCli, TheTextSaysItIsSimulatedAndListsEveryPolicy) {
  const auto r = gpucap(kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* word : {"[simulated]", "gpucap *", "equal", "tdp", "balancer", "optimum"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word << "\n" << r.out;
  }
}

TEST(ClusterSimulateCli, BadInputIsRefusedWithOneLine) {
  const std::vector<std::string> base = {"cluster", "simulate", "--duration", "60"};
  expect_error(test::with(base, {"--budget", "-5"}), 2, "--budget '-5' must be a positive number");
  expect_error(test::with(base, {"--budget", "0"}), 2, "must be a positive number");
  expect_error(test::with(base, {"--budget", "900%"}), 2, "--budget '900%' is absurd");
  expect_error(test::with(base, {"--budget", "1e12"}), 2, "--budget '1e12' is absurd: more than 1e+09 W");
  expect_error(test::with(base, {"--budget", "lots"}), 2, "--budget 'lots' must be a positive number");
  expect_error(test::with(base, {"--nodes", "0"}), 2, "--nodes '0' must be a whole number from 1 to 10000");
  expect_error(test::with(base, {"--nodes", "10001"}), 2, "from 1 to 10000");
  expect_error(test::with(base, {"--nodes", "-3"}), 2, "from 1 to 10000");
  expect_error(test::with(base, {"--policy", "fair"}), 2, "--policy 'fair' must be gpucap, equal, tdp or balancer");
  expect_error(test::with(base, {"--seed", "x"}), 2, "--seed 'x'");
  expect_error(test::with(base, {"--budget-step", "soon=50%"}), 2, "must be SECONDS=BUDGET");
  expect_error(test::with(base, {"--budget-step", "500=50%"}), 2, "--budget-step at 500 s must lie inside the run (0, 60) s");
  expect_error(test::with(base, {"--gpus", "nosuch"}), 2, "nosuch");
  expect_error(test::with(base, {"--load", "lots"}), 2, "--load 'lots' must be MIN-MAX");
  expect_error(test::with(base, {"--load", "2-1"}), 2, "--load 2-1 must satisfy 0 < MIN <= MAX <= 100");
  expect_error({"cluster", "simulate", "--duration", "-5"}, 2, "--duration -5 s must be in (0, 1e6]");
  expect_error(test::with(base, {"--threads", "0"}), 2, "--threads 0 must be between 1 and 64");
  expect_error({"cluster"}, 2, "");
}

}  // namespace
}  // namespace gpucap
