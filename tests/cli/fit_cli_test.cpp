// End-to-end tests of `gpucap fit` and `gpucap predict --fitted`: a synthetic profile in PctoDL's
// format in, a model file out, the same predictions as the library, and one clear error line (and
// no model file) for every kind of bad input.

#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gpucap/core/files.hpp"
#include "gpucap/predict/fitted.hpp"
#include "support/cli_runner.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;
using test::with;

constexpr const char* kHeader =
    "model_name,p_list,b_list,target_freq,mem_freq,sm_freq,sm_util,mem_util,throughput_total,power_avg,power_max\n";

// A small plausible GPU: per-batch overhead + compute on the share the batch can fill, a shared
// memory bandwidth, power = static + activity·clock^2.2; a deterministic ±1 % wobble as noise.
std::string profile_rows(const std::string& model, double mem_mhz) {
  std::string csv;
  int k = 0;
  const auto row = [&](const std::vector<int>& shares, const std::vector<int>& batches, double f) {
    const double phi = f / 1410.0;
    double isolated = 0.0, throughput = 0.0, activity = 0.0;
    std::vector<double> fill, compute;
    for (std::size_t i = 0; i < shares.size(); ++i) {
      const double x = shares[i] / 100.0, b = batches[i];
      fill.push_back(std::pow(std::pow(x, -3.0) + std::pow(b / 48.0, -3.0), -1.0 / 3.0));
      compute.push_back(b / 3000.0 / (fill.back() * std::pow(phi, 0.85)));
      isolated += b / (0.004 + compute.back());
    }
    const double slowdown = std::pow(1.0 + std::pow(isolated / (5200.0 * mem_mhz / 1215.0), 4.0), 0.25) *
                            (1.0 + 0.03 * static_cast<double>(shares.size() - 1));
    for (std::size_t i = 0; i < shares.size(); ++i) {
      const double latency = 0.004 + compute[i] * slowdown;
      throughput += batches[i] / latency;
      activity += fill[i] * compute[i] * slowdown / latency;
    }
    const double wobble = 1.0 + 0.01 * std::sin(1.7 * ++k);
    const double power = 30.0 + 25.0 * phi * phi * phi + 190.0 * activity * std::pow(phi, 2.2);
    std::string p, b;
    for (std::size_t i = 0; i < shares.size(); ++i) {
      p += fmt::format("{}{}", i ? ", " : "", shares[i]);
      b += fmt::format("{}{}", i ? ", " : "", batches[i]);
    }
    csv += fmt::format("{},\"[{}]\",\"[{}]\",{:g},{:g},{:g},{:.1f},{:.1f},{:.2f},{:.2f},{:.2f}\n", model, p, b, f,
                       mem_mhz, f, 95.0 * activity, 30.0, throughput * wobble, 0.95 * power, power / wobble);
  };
  for (const int share : {10, 20, 25, 50, 100}) {
    for (int n = 1; n * share <= 100; ++n) {
      for (const int batch : {8, 16, 32, 64, 128}) row(std::vector<int>(static_cast<std::size_t>(n), share),
                                                       std::vector<int>(static_cast<std::size_t>(n), batch), 1410);
    }
  }
  for (double f = 210; f <= 1410; f += 200) {
    for (const int batch : {8, 32}) {
      row({25, 25, 25, 25}, {batch, batch, batch, batch}, f);
      row({50, 50}, {batch, batch}, f);
    }
  }
  csv += model + ",\"[50, 50]\",\"[512, 512]\",1410,1215,0,0,0,0,0,0\n";  // out of memory
  return csv;
}

TEST(FitCli, FitsAProfileAndPredictUsesTheModel) {
  test::TempDir dir;
  const auto profile = dir.write("profile.csv", std::string(kHeader) + profile_rows("resnet50", 1215) +
                                                    profile_rows("vgg19", 1215));
  const auto model = dir.file("model.json");
  const auto r = gpucap({"fit", "--profile", profile, "--model", "resnet50", "--out", model, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["model"], "resnet50");
  EXPECT_EQ(json["rows_oom"], 1);
  EXPECT_EQ(json["other_models"], nlohmann::json::array({"vgg19"}));
  EXPECT_EQ(json["rows_used"].get<int>(), json["rows_train"].get<int>() + json["rows_held_out"].get<int>());
  EXPECT_LT(json["held_out"]["throughput"]["mape_pct"].get<double>(), 3.0);
  EXPECT_LT(json["held_out"]["power"]["mape_pct"].get<double>(), 3.0);
  EXPECT_EQ(json["memory_clocks_mhz"], nlohmann::json::array({1215.0}));
  ASSERT_TRUE(std::filesystem::exists(model));
  EXPECT_FALSE(std::filesystem::exists(model + ".tmp"));

  const std::vector<std::string> predict = {"predict", "--fitted", model, "--p", "50", "25", "--b", "32", "16",
                                            "--f", "1200"};
  const auto p = gpucap(with(predict, {"--json"}));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto got = nlohmann::json::parse(p.out);
  const auto expected = predict::FittedPredictor::load(model).predict(std::vector<double>{50, 25},
                                                                      std::vector<int>{32, 16}, 1200, 1215);
  EXPECT_DOUBLE_EQ(got["throughput"].get<double>(), expected.throughput_img_s);
  EXPECT_DOUBLE_EQ(got["power"].get<double>(), expected.power_w);
  EXPECT_DOUBLE_EQ(got["u_sm"].get<double>(), expected.u_sm_pct);
  EXPECT_EQ(got["predictor"], "fitted");
  EXPECT_EQ(got["memory_clock_mhz"], 1215.0);
  EXPECT_TRUE(got["predicted"].get<bool>());
  const auto text = gpucap(predict);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("a prediction, not a measurement"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("throughput"), std::string::npos) << text.out;
  EXPECT_EQ(gpucap(with(predict, {"--model", "ResNet50", "--mem", "1215"})).exit_code, 0) << "matching names";

  const auto report = gpucap({"fit", "--profile", profile, "--model", "resnet50", "--out", dir.file("again.json")});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  for (const char* label : {"rows", "skipped", "held out, 20 %", "closed-form priors alone", "wrote"}) {
    EXPECT_NE(report.out.find(label), std::string::npos) << label << "\n" << report.out;
  }
  EXPECT_EQ(read_text_file(dir.file("again.json")), read_text_file(model)) << "the same profile, the same bytes";

  // The fitted model drives the partitioners too.
  const std::vector<std::string> partition = {"partition", "--predictor", "fitted", "--fitted", model, "--model",
                                              "resnet50", "--gpu", "a100", "--power-cap", "180", "--json"};
  const auto plan = gpucap(partition);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const auto planned = nlohmann::json::parse(plan.out);
  EXPECT_EQ(planned["predictor"], "fitted");
  for (const char* key : {"greedy", "local"}) {
    EXPECT_LE(planned[key]["power_w"].get<double>(), 180.0) << key;
    EXPECT_EQ(planned[key]["memory_clock_mhz"], 1215.0) << key;
  }
  EXPECT_FALSE(planned.contains("greedy_vectorised_wall_ms")) << "only PctoDL's fits split at the clock";
  expect_error(with(partition, {"--mem", "810"}), 2, "fitted: 1215 MHz");
  expect_error({"partition", "--predictor", "fitted", "--model", "resnet50", "--gpu", "a100", "--power-cap", "180"}, 2,
               "--fitted FILE goes with --predictor fitted");
}

TEST(FitCli, SeveralProfilesAndMemoryClocks) {
  test::TempDir dir;
  const auto a = dir.write("a.csv", std::string(kHeader) + profile_rows("m", 1215));
  const auto b = dir.write("b.csv", std::string(kHeader) + profile_rows("m", 877));
  const auto model = dir.file("m.json");
  const auto r = gpucap({"fit", "--profile", a, "--profile", b, "--out", model, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["memory_clocks_mhz"], nlohmann::json::array({877.0, 1215.0}));
  EXPECT_EQ(json["model"], "m") << "the only model: --model may be left out";
  const std::vector<std::string> predict = {"predict", "--fitted", model, "--p", "50", "--b", "32", "--f", "1410"};
  expect_error(predict, 2, "fitted at memory clocks 877, 1215 MHz: choose one with --mem");
  expect_error(with(predict, {"--mem", "5001"}), 2, "no fit for memory clock 5001 MHz; fitted: 877, 1215 MHz");
  EXPECT_EQ(gpucap(with(predict, {"--mem", "877"})).exit_code, 0);
}

TEST(FitCli, BadInputIsOneErrorLineAndNoModelFile) {
  test::TempDir dir;
  const auto model = dir.file("model.json");
  const auto fit_fails = [&](const std::vector<std::string>& args, int code, const std::string& fragment) {
    expect_error(with({"fit", "--out", model}, args), code, fragment);
    EXPECT_FALSE(std::filesystem::exists(model)) << fragment;
    EXPECT_FALSE(std::filesystem::exists(model + ".tmp")) << fragment;
  };
  const auto good = dir.write("good.csv", std::string(kHeader) + profile_rows("resnet50", 1215));
  fit_fails({"--profile", dir.file("missing.csv")}, 4, "missing.csv: cannot open");
  const auto bad = dir.write("bad.csv", std::string(kHeader) + "resnet50,\"[50, 25]\",\"[8]\",1410,1215,1410,1,1,1,1,1\n");
  fit_fails({"--profile", good, "--profile", bad}, 3, "bad.csv:2: column b_list");
  const auto over = dir.write("over.csv", std::string(kHeader) + "resnet50,\"[60, 50]\",\"[8, 8]\",1410,1215,1410,1,1,1,1,1\n");
  fit_fails({"--profile", over}, 3, "over.csv:2: column p_list: MPS shares add up to 110 %");
  fit_fails({"--profile", good, "--model", "vgg19"}, 2, "no rows of model 'vgg19'; it holds: resnet50");
  const auto rows = profile_rows("resnet50", 1215);
  std::size_t end = 0;
  for (int line = 0; line < 12; ++line) end = rows.find('\n', end) + 1;
  const auto few = dir.write("few.csv", std::string(kHeader) + rows.substr(0, end));
  fit_fails({"--profile", few}, 3, "at least 20 are needed");
  fit_fails({"--profile"}, 2, "--profile");
  expect_error({"fit", "--profile", good, "--out", dir.file("no/such/folder/m.json")}, 4, "m.json");
  EXPECT_FALSE(std::filesystem::exists(dir.file("no/such/folder/m.json")));
  EXPECT_EQ(gpucap({"fit", "--profile", good}).exit_code, 2) << "--out is required";

  const auto corrupt = dir.write("corrupt.json", "{\"format\": \"gpucap-predictor\", \"version\": 1");
  const std::vector<std::string> tenants = {"--p", "50", "--b", "32", "--f", "1410"};
  expect_error(with({"predict", "--fitted", corrupt}, tenants), 3, "corrupt.json: not a gpucap predictor");
  expect_error(with({"predict", "--fitted", dir.file("none.json")}, tenants), 4, "none.json");
  ASSERT_EQ(gpucap({"fit", "--profile", good, "--out", model}).exit_code, 0);
  expect_error(with({"predict", "--fitted", model, "--gpu", "a100"}, tenants), 2, "--fitted replaces");
  expect_error(with({"predict", "--fitted", model, "--model", "vgg19"}, tenants), 2, "a predictor of resnet50, not vgg19");
  expect_error({"predict", "--fitted", model, "--p", "60", "50", "--b", "8", "8", "--f", "1410"}, 2, "add up to 110 %");
  expect_error({"predict", "--p", "50", "--b", "8", "--f", "1410", "--gpu", "a100"}, 2,
               "--model is required (or --fitted MODEL.json)");
}

}  // namespace
}  // namespace gpucap
