// End-to-end tests of the gpucap binary's MPS commands: PctoDL's predictor and partitioner, a run of
// MPS tenants on the twin, and PctoDL's profiling matrix that gpucap fit reads.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpucap/core/files.hpp"
#include "gpucap/predict/pctodl.hpp"
#include "support/cli_runner.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;
using test::with;

TEST(Cli, PredictRunsPctodlsPredictorAndRejectsBadTenants) {
  const auto params = test::shared_file("pctodl");
  const std::vector<std::string> base = {"predict", "--params", params, "--model", "resnet50", "--gpu", "3080ti",
                                         "--p", "50", "25", "--b", "16", "16", "--f", "1950"};
  const auto r = gpucap(with(base, {"--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  const auto predictor = predict::PctodlPredictor::load(params, "resnet50", "imagenet_mem5001");
  const std::vector<double> p = {50, 25};
  const std::vector<int> b = {16, 16};
  const auto expected = predictor.predict(p, b, 1950);
  EXPECT_DOUBLE_EQ(json["u_sm"].get<double>(), expected.u_sm);
  EXPECT_DOUBLE_EQ(json["u_mem"].get<double>(), expected.u_mem);
  EXPECT_DOUBLE_EQ(json["throughput"].get<double>(), expected.throughput);
  EXPECT_DOUBLE_EQ(json["power"].get<double>(), expected.power_w);
  const auto text = gpucap(base);
  EXPECT_NE(text.out.find("a prediction, not a measurement"), std::string::npos) << text.out;
  const auto mem9501 = nlohmann::json::parse(gpucap(with(base, {"--mem", "9501", "--json"})).out);
  EXPECT_EQ(mem9501["param_set"], "imagenet_mem9501");
  expect_error({"predict", "--params", params, "--model", "resnet50", "--gpu", "3080ti", "--p", "60", "50", "--b", "8",
                "8", "--f", "1500"},
               2, "add up to 110 %");
  expect_error({"predict", "--params", params, "--model", "resnet50", "--gpu", "3080ti", "--p", "60", "--b", "8", "8",
                "--f", "1500"},
               2, "--p lists 1 tenants but --b lists 2");
  expect_error(with(base, {"--mem", "810"}), 2, "not 810");
  expect_error({"predict", "--params", params, "--model", "resnet18", "--gpu", "a100", "--p", "50", "--b", "8", "--f",
                "1400"},
               2, "resnet18");
  expect_error({"predict", "--params", params, "--model", "resnet50", "--gpu", "h100", "--p", "50", "--b", "8", "--f",
                "1400"},
               2, "not 'h100'");
  expect_error({"predict", "--params", "/nonexistent", "--model", "resnet50", "--gpu", "a100", "--p", "50", "--b", "8",
                "--f", "1400"},
               4, "/nonexistent/index.json");
}

TEST(Cli, PartitionPlansTenantsAndClocksUnderTheCap) {
  const auto params = test::shared_file("pctodl");
  const std::vector<std::string> base = {"partition", "--params", params, "--model", "resnet50", "--gpu", "3080ti",
                                         "--power-cap", "200"};
  const auto r = gpucap(with(base, {"--json", "--exhaustive", "--max-tenants", "2", "--mps-step", "10"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_TRUE(json["predicted"].get<bool>());
  const auto& greedy = json["greedy"];
  ASSERT_FALSE(greedy["tenants"].empty());
  int total = 0;
  for (const auto& t : greedy["tenants"]) total += t["mps_pct"].get<int>();
  EXPECT_LE(total, 100);
  EXPECT_LE(greedy["power_w"].get<double>(), 200.0);
  EXPECT_LE(json["exhaustive"]["power_w"].get<double>(), 200.0);
  EXPECT_LE(json["exhaustive"]["tenants"].size(), 2u);
  EXPECT_GT(json["greedy_predictor_calls"].get<int>(), 0);
  EXPECT_TRUE(json["greedy_vectorised_same_plan"].get<bool>());
  EXPECT_LT(json["greedy_vectorised_curves"].get<int>(), json["greedy_predictor_calls"].get<int>());
  const auto text = gpucap(base);
  EXPECT_NE(text.out.find("predicted by PctoDL's fits, not measured"), std::string::npos) << text.out;
  expect_error(with(base, {"--mps-step", "3"}), 2, "--mps-step 3 must divide 100");
  expect_error({"partition", "--params", params, "--model", "resnet50", "--gpu", "p40", "--power-cap", "200"}, 2,
               "not 'p40'");
  expect_error({"partition", "--params", params, "--model", "resnet50", "--gpu", "3080ti", "--power-cap", "20"}, 2,
               "no partition of resnet50 fits under 20 W");
  expect_error({"partition", "--params", params, "--model", "resnet50", "--gpu", "3080ti", "--power-cap", "200",
                "--mem", "810"},
               2, "not 810");
}

// A copy of the data folder, for commands that write to it.

TEST(CliRunMps, PctodlRunsMpsTenantsOnTheTwinFromPctodlsFits) {
  const auto run = gpucap({"run", "--gpu", "rtx3080ti", "--model", "resnet50", "--algorithm", "pctodl", "--power-cap",
                           "130", "--duration", "20", "--params", test::shared_file("pctodl"), "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_GT(json["throughput_img_s"].get<double>(), 0.0);
  EXPECT_TRUE(json["simulated"].get<bool>());
  expect_error({"run", "--gpu", "rtx3080ti", "--model", "resnet50", "--algorithm", "capfit", "--power-cap", "130",
                "--duration", "20", "--params", "x"},
               2, "--params does not apply to capfit");
  expect_error({"run", "--gpu", "rtx3080ti", "--model", "resnet50", "--algorithm", "pctodl", "--power-cap", "130",
                "--duration", "20", "--params", "/nonexistent"},
               4, "/nonexistent/index.json: cannot open");
}

TEST(CliProfile, WritesPctodlsProfileColumnsThatFitReads) {
  test::TempDir dir;
  const auto csv = dir.path() + "/profile.csv";
  const auto result = gpucap({"profile", "--gpu", "rtx3080ti", "--model", "resnet50", "--out", csv, "--measure-s", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto text = read_text_file(csv);
  EXPECT_EQ(text.rfind("model_name,p_list,b_list,target_freq,mem_freq,sm_freq,sm_util,mem_util,throughput_total,"
                       "power_avg,power_max\n",
                       0),
            0u);
  EXPECT_NE(text.find("resnet50,\"[25, 25, 25, 25]\",\"[16, 16, 16, 16]\",2100,9501,"), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 253);  // header + the stress matrix
  const auto model = dir.path() + "/model.json";
  const auto fit = gpucap({"fit", "--profile", csv, "--out", model, "--json"});
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  expect_error({"profile", "--gpu", "rtx3080ti", "--model", "resnet50", "--out", csv, "--mem", "1234"}, 2,
               "no memory clock 1234");
  expect_error({"profile", "--gpu", "rtx3080ti", "--model", "resnet50", "--out", csv, "--measure-s", "0"}, 2,
               "a measurement must last");
}

}  // namespace
}  // namespace gpucap
