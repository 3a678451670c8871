#include "gpucap/predict/fitted.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/tune/partition.hpp"
#include "support/expect_error.hpp"
#include "support/paths.hpp"

namespace gpucap::predict {
namespace {

using test::expect_error_from;

// ---------------------------------------------------------------------------------------------
// Synthetic ground truths, written independently of the predictor's code.

struct Config {
  std::vector<double> shares_pct;
  std::vector<int> batches;
  double f_mhz = 0.0;
  double mem_mhz = 0.0;
};

struct Measurement {
  double throughput = 0.0, power_max = 0.0, power_avg = 0.0, sm_util = 0.0, mem_util = 0.0;
};

using Truth = std::function<Measurement(const Config&)>;

// In the predictor's family, except the static power: an A100-like cubic (PctoDL's fit, with a
// negative quadratic term) where the predictor's cubic has non-negative coefficients.
// Per batch: fixed overhead + compute on the fraction of the GPU the share and the batch fill;
// the tenants share the memory bandwidth (which scales with the memory clock).
Measurement truth_in_family(const Config& c) {
  const double f_max = 1410.0, phi = c.f_mhz / f_max;
  const double t0 = 0.004, w = 1.0 / 3000.0, b_fill = 48.0, n = 3.0;
  const double bandwidth_img_s = 5200.0 * (c.mem_mhz / 1215.0);
  const std::size_t tenants = c.batches.size();
  std::vector<double> fill(tenants), compute(tenants);
  double isolated = 0.0;
  for (std::size_t i = 0; i < tenants; ++i) {
    const double x = c.shares_pct[i] / 100.0, b = c.batches[i];
    fill[i] = std::pow(std::pow(x, -n) + std::pow(b / b_fill, -n), -1.0 / n);
    compute[i] = b * w / (fill[i] * std::pow(phi, 0.85));
    isolated += b / (t0 + compute[i]);
  }
  const double demand = isolated / bandwidth_img_s;
  const double slowdown = std::pow(1.0 + std::pow(demand, 4.0), 0.25) * (1.0 + 0.03 * static_cast<double>(tenants - 1));
  Measurement m;
  double activity = 0.0, idle = 1.0;
  for (std::size_t i = 0; i < tenants; ++i) {
    const double stretched = compute[i] * slowdown;
    const double latency = t0 + stretched;
    m.throughput += c.batches[i] / latency;
    activity += fill[i] * stretched / latency;
    idle *= 1.0 - stretched / latency;
  }
  const double f = c.f_mhz;
  const double static_w = 3.166e-8 * f * f * f - 5.129e-5 * f * f + 0.02606 * f + 24.99;
  const double traffic = m.throughput / bandwidth_img_s;
  m.power_max = static_w + 190.0 * activity * std::pow(phi, 2.2) + 45.0 * traffic;
  m.power_avg = 0.96 * m.power_max;
  m.sm_util = 100.0 * 0.97 * (1.0 - idle);
  m.mem_util = 100.0 * 0.8 * traffic;
  return m;
}

// Outside the family: tanh saturation in the share, an Amdahl clock law (not a power law), an
// exponential interference, and power on a voltage–frequency curve with a voltage floor.
Measurement truth_off_family(const Config& c) {
  const double f_max = 1410.0, phi = c.f_mhz / f_max;
  const std::size_t tenants = c.batches.size();
  double throughput = 0.0, activity = 0.0;
  for (std::size_t i = 0; i < tenants; ++i) {
    const double x = c.shares_pct[i] / 100.0, b = c.batches[i];
    const double capacity = std::tanh(2.4 * x) / std::tanh(2.4);
    const double efficiency = std::pow(b, 0.8) / (std::pow(b, 0.8) + 6.0);
    const double compute_fraction = 0.65 + 0.25 * std::tanh(b / 64.0);
    const double clock = 1.0 / (compute_fraction / phi + 1.0 - compute_fraction);
    throughput += 2600.0 * capacity * efficiency * clock;
    activity += capacity * (0.4 + 0.6 * efficiency) * compute_fraction;
  }
  const double demand = throughput / 3800.0;
  throughput *= std::exp(-0.06 * static_cast<double>(tenants - 1)) / std::sqrt(1.0 + demand * demand);
  const double volts = std::max(0.72, 0.45 + 0.5 * phi);
  Measurement m;
  m.throughput = throughput;
  m.power_max = 28.0 + 30.0 * volts * volts + 230.0 * std::min(activity, 1.2) * phi * volts * volts + 25.0 * demand;
  m.power_avg = 0.95 * m.power_max;
  m.sm_util = 100.0 * std::min(1.0, 0.3 + activity);
  m.mem_util = 100.0 * std::min(1.0, 0.7 * demand);
  return m;
}

// PctoDL's profiling plan (seed-systems.md §2.3): homogeneous tenants at the highest SM clock for
// many shares, counts and batch sizes, a few heterogeneous mixes, and frequency sweeps of a few
// configurations. Some configurations run out of memory (zeros).
std::vector<Config> profile_plan(double mem_mhz) {
  std::vector<Config> plan;
  const double f_max = 1410.0;
  for (const int share : {5, 10, 15, 20, 25, 30, 40, 50, 100}) {
    for (int tenants = 1; tenants * share <= 100; tenants = tenants < 4 ? tenants + 1 : tenants * 2) {
      for (const int b : {4, 8, 16, 32, 64, 128, 256}) {
        if (b < std::max(4, share * 8 / 10) || b > share * 64 / 10 + 8) continue;
        plan.push_back({std::vector<double>(static_cast<std::size_t>(tenants), share),
                        std::vector<int>(static_cast<std::size_t>(tenants), b), f_max, mem_mhz});
      }
    }
  }
  plan.push_back({{50, 25, 25}, {64, 16, 16}, f_max, mem_mhz});
  plan.push_back({{40, 20, 10}, {128, 32, 8}, f_max, mem_mhz});
  plan.push_back({{60, 30}, {96, 32}, f_max, mem_mhz});
  plan.push_back({{70, 15, 15}, {32, 64, 8}, f_max, mem_mhz});
  for (double f = 210.0; f <= f_max + 1.0; f += 150.0) {
    for (const int b : {8, 16, 32}) {
      plan.push_back({{25, 25, 25, 25}, {b, b, b, b}, f, mem_mhz});
      plan.push_back({{50, 50}, {b, b}, f, mem_mhz});
      plan.push_back({{10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, std::vector<int>(10, b), f, mem_mhz});
    }
    plan.push_back({{100}, {128}, f, mem_mhz});
  }
  return plan;
}

std::string list(const std::vector<double>& v) {
  std::string s;
  for (const double x : v) s += fmt::format("{}{:g}", s.empty() ? "" : ", ", x);
  return "[" + s + "]";
}
std::string list(const std::vector<int>& v) {
  std::string s;
  for (const int x : v) s += fmt::format("{}{}", s.empty() ? "" : ", ", x);
  return "[" + s + "]";
}

constexpr const char* kHeader =
    "model_name,p_list,b_list,target_freq,mem_freq,sm_freq,sm_util,mem_util,throughput_total,power_avg,power_max\n";

// A profile CSV of `truth` with 1 % throughput noise and 1 W power noise (fixed seed); batches of
// 512 images or more in flight are written as out-of-memory rows (zeros), as PctoDL writes them.
std::string profile_csv(const Truth& truth, const std::vector<Config>& plan, const std::string& model,
                        std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> unit(0.0, 1.0);
  std::string csv;
  for (const auto& c : plan) {
    int in_flight = 0;
    for (const int b : c.batches) in_flight += b;
    const bool oom = in_flight >= 512;
    auto m = truth(c);
    const double tp_noise = 1.0 + 0.01 * unit(rng), p_noise = unit(rng);
    if (oom) m = Measurement{};
    csv += fmt::format("{},\"{}\",\"{}\",{:g},{:g},{:.1f},{:.2f},{:.2f},{:.3f},{:.3f},{:.3f}\n", model, list(c.shares_pct),
                       list(c.batches), c.f_mhz, c.mem_mhz, oom ? 0.0 : c.f_mhz, m.sm_util, m.mem_util,
                       m.throughput * (oom ? 0.0 : tp_noise), m.power_avg, m.power_max + (oom ? 0.0 : p_noise));
  }
  return csv;
}

// Heterogeneous configurations the profile does not hold, at clocks between and on its sweep.
std::vector<Config> unseen_configs(double mem_mhz) {
  std::vector<Config> out;
  for (const double f : {510.0, 885.0, 1200.0, 1410.0}) {
    out.push_back({{35, 35, 30}, {48, 24, 16}, f, mem_mhz});
    out.push_back({{45, 55}, {32, 64}, f, mem_mhz});
    out.push_back({{20, 20, 20, 20}, {16, 16, 16, 16}, f, mem_mhz});
    out.push_back({{80}, {96}, f, mem_mhz});
  }
  return out;
}

class FittedPredictorTest : public ::testing::Test {
 protected:
  // Fitted once per test binary: each fit takes a moment.
  static const FittedPredictor& in_family() {
    static const FittedPredictor p = [] {
      test::TempDir dir;
      const auto path = dir.write("profile.csv", std::string(kHeader) +
                                                     profile_csv(truth_in_family, profile_plan(1215), "resnet50", 1) +
                                                     profile_csv(truth_off_family, profile_plan(1215), "vgg19", 2));
      FitOptions options;
      options.model = "resnet50";
      return fit_predictor(read_profile_csv(path), options);
    }();
    return p;
  }
};

void print(const char* what, const FitReport& r) {
  std::printf("%s: %zu rows (%zu train, %zu held out), fit %.2f s; held out: throughput MAPE %.2f %% R2 %.4f "
              "(priors alone %.2f %%), power MAPE %.2f %% R2 %.4f (priors alone %.2f %%)\n",
              what, r.rows_used, r.rows_train, r.rows_held_out, r.fit_seconds, r.held_out_throughput.mape_pct,
              r.held_out_throughput.r2, r.held_out_throughput_prior.mape_pct, r.held_out_power.mape_pct,
              r.held_out_power.r2, r.held_out_power_prior.mape_pct);
}

// ---------------------------------------------------------------------------------------------
// Profile CSV

TEST(FittedProfileCsv, ReadsPctodlsFormatAndItsVariants) {
  test::TempDir dir;
  const auto path = dir.write(
      "p.csv",
      "model_name,p_list,b_list,target_freq,mem_freq,sm_freq,sm_util,mem_util,throughput_total,power_avg,power_max\r\n"
      "resnet50,\"[50, 25]\",\"[16, 8]\",1410,1215,1405.5,97.5,40.25,1234.5,180.5,195.25\r\n"
      "resnet50,\"[50,50]\",\"[32,32]\",1410,1215,1410,99,41,1500,190,200\n"
      "\n"
      "resnet50,25;25;25,8;8;8,1260,1215,0,90,30,900,150,160\n"
      "resnet50,[100],[64],1410,1215,1410,99,50,1300,200,210\n"
      "resnet50,\"[20, 20, 20, 20, 20]\",\"[256, 256, 256, 256, 256]\",1410,1215,0,0,0,0,0,0\n"
      "static,[],[],1410,1215,1410,0,0,0,30,32\n");
  const auto rows = read_profile_csv(path);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].model, "resnet50");
  EXPECT_EQ(rows[0].shares_pct, (std::vector<double>{50, 25}));
  EXPECT_EQ(rows[0].batches, (std::vector<int>{16, 8}));
  EXPECT_DOUBLE_EQ(rows[0].target_sm_clock_mhz, 1410);
  EXPECT_DOUBLE_EQ(rows[0].sm_clock_mhz, 1405.5);
  EXPECT_DOUBLE_EQ(rows[0].clock_mhz(), 1405.5) << "the measured clock when there is one";
  EXPECT_DOUBLE_EQ(rows[0].memory_clock_mhz, 1215);
  EXPECT_DOUBLE_EQ(rows[0].sm_util_pct, 97.5);
  EXPECT_DOUBLE_EQ(rows[0].mem_util_pct, 40.25);
  EXPECT_DOUBLE_EQ(rows[0].throughput_img_s, 1234.5);
  EXPECT_DOUBLE_EQ(rows[0].power_avg_w, 180.5);
  EXPECT_DOUBLE_EQ(rows[0].power_max_w, 195.25);
  EXPECT_EQ(rows[0].source, path + ":2");
  EXPECT_EQ(rows[1].batches, (std::vector<int>{32, 32}));
  EXPECT_EQ(rows[2].shares_pct, (std::vector<double>{25, 25, 25}));
  EXPECT_DOUBLE_EQ(rows[2].clock_mhz(), 1260) << "no measured clock: the target";
  EXPECT_EQ(rows[2].source, path + ":5") << "physical line numbers";
  EXPECT_EQ(rows[3].batches, (std::vector<int>{64}));
  EXPECT_TRUE(rows[4].oom());
  EXPECT_FALSE(rows[3].oom());
  EXPECT_TRUE(rows[5].idle());
}

TEST(FittedProfileCsv, ColumnsInAnyOrderAndExtraColumns) {
  test::TempDir dir;
  const auto path = dir.write("p.csv",
                              "power_max,extra,mem_freq,throughput_total,b_list,p_list,model_name,sm_freq\n"
                              "200,x,1215,1000,\"[8, 8]\",\"[50, 50]\",mnasnet,1410\n");
  const auto rows = read_profile_csv(path);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].model, "mnasnet");
  EXPECT_EQ(rows[0].batches, (std::vector<int>{8, 8}));
  EXPECT_DOUBLE_EQ(rows[0].power_max_w, 200);
  EXPECT_DOUBLE_EQ(rows[0].sm_util_pct, 0) << "absent optional column";
}

TEST(FittedProfileCsv, ErrorsNameTheFileTheLineAndTheColumn) {
  test::TempDir dir;
  const std::string header = kHeader;
  const auto fails = [&](const std::string& body, const std::string& fragment) {
    const auto path = dir.write("bad.csv", header + body);
    expect_error_from([&] { (void)read_profile_csv(path); }, ErrorCode::invalid_data, fragment);
  };
  fails("m,\"[50, 25]\",\"[8]\",1410,1215,1410,1,1,100,100,100\n", "bad.csv:2: column b_list: lists 1 batch sizes but p_list lists 2");
  fails("m,\"[60, 50]\",\"[8, 8]\",1410,1215,1410,1,1,100,100,100\n", "bad.csv:2: column p_list: MPS shares add up to 110 %");
  fails("m,\"[0]\",\"[8]\",1410,1215,1410,1,1,100,100,100\n", "column p_list: MPS share 0 must be in (0, 100]");
  fails("m,\"[50, x]\",\"[8, 8]\",1410,1215,1410,1,1,100,100,100\n", "column p_list: '[50, x]' is not a list");
  fails("m,\"[50]\",\"[8.5]\",1410,1215,1410,1,1,100,100,100\n", "column b_list: batch size 8.5 must be a whole number");
  fails("m,\"[50]\",\"[0]\",1410,1215,1410,1,1,100,100,100\n", "column b_list: batch size 0");
  fails("m,\"[50]\",\"[8]\",1410,1215,1410,1,1,fast,100,100\n", "bad.csv:2: column throughput_total: 'fast' is not a number");
  fails("m,\"[50]\",\"[8]\",1410,1215,1410,1,1,-3,100,100\n", "column throughput_total: -3 must not be negative");
  fails("m,\"[50]\",\"[8]\",1410,1215,1410,1,1,100,100,0\n", "column power_max: must be > 0 in a row with a throughput");
  fails("m,\"[50]\",\"[8]\",0,1215,0,1,1,100,100,100\n", "neither sm_freq nor target_freq");
  fails("m,\"[50]\",\"[8]\",1410,1215,1410,1,1,100,100\n", "bad.csv:2: 10 fields, but the header has 11 columns");
  fails("m,\"[50]\",\"[8],1410,1215,1410,1,1,100,100,100\n", "bad.csv:2: field 3: unterminated quote");
  fails("m,[50],[8],1410,1215,1410,1,1,100,100,100\n\nm,\"[50]\"x,[8],1410,1215,1410,1,1,100,100,100\n",
        "bad.csv:4: field 2: text after the closing quote");
  fails("", "no profile rows after the header");
  const auto no_power = dir.write("h.csv", "model_name,p_list,b_list,mem_freq,sm_freq,throughput_total\n");
  expect_error_from([&] { (void)read_profile_csv(no_power); }, ErrorCode::invalid_data,
                    "h.csv:1: the header has no column power_max");
  const auto empty = dir.write("e.csv", "\n\n");
  expect_error_from([&] { (void)read_profile_csv(empty); }, ErrorCode::invalid_data, "e.csv: empty file");
  expect_error_from([&] { (void)read_profile_csv(dir.file("missing.csv")); }, ErrorCode::io, "missing.csv");
}

// ---------------------------------------------------------------------------------------------
// Fitting

TEST_F(FittedPredictorTest, RecoversAGroundTruthInItsFamily) {
  const auto& p = in_family();
  const auto& r = p.report();
  print("in-family truth", r);
  EXPECT_EQ(r.model, "resnet50");
  EXPECT_EQ(r.other_models, (std::vector<std::string>{"vgg19"}));
  EXPECT_GT(r.rows_other_models, 100u);
  EXPECT_GT(r.rows_oom, 0u) << "the out-of-memory rows are counted and skipped";
  EXPECT_EQ(r.rows_train + r.rows_held_out, r.rows_used);
  EXPECT_NEAR(static_cast<double>(r.rows_held_out) / static_cast<double>(r.rows_used), 0.2, 0.05);
  EXPECT_LT(r.held_out_throughput.mape_pct, 2.5);
  EXPECT_LT(r.held_out_power.mape_pct, 2.0);
  EXPECT_GT(r.held_out_throughput.r2, 0.99);
  EXPECT_GT(r.held_out_power.r2, 0.99);
  EXPECT_EQ(p.memory_clocks_mhz(), std::vector<double>{1215});
  // Against the noiseless truth at heterogeneous mixes and clocks the profile does not hold.
  double worst_tp = 0.0, worst_p = 0.0;
  for (const auto& c : unseen_configs(1215)) {
    const auto truth = truth_in_family(c);
    const auto got = p.predict(c.shares_pct, c.batches, c.f_mhz, c.mem_mhz);
    worst_tp = std::max(worst_tp, std::abs(got.throughput_img_s / truth.throughput - 1.0));
    worst_p = std::max(worst_p, std::abs(got.power_w / truth.power_max - 1.0));
    if (c.f_mhz == 1410.0) {
      EXPECT_NEAR(got.u_sm_pct, truth.sm_util, 5.0);
      ASSERT_TRUE(got.u_mem_pct.has_value());
      EXPECT_NEAR(*got.u_mem_pct, truth.mem_util, 5.0);
    }
  }
  std::printf("in-family truth, unseen mixes and clocks: worst throughput error %.2f %%, power %.2f %%\n",
              100.0 * worst_tp, 100.0 * worst_p);
  EXPECT_LT(worst_tp, 0.02);
  EXPECT_LT(worst_p, 0.03);
}

TEST(FittedPredictor, TheResidualRegressorCorrectsPriorsOfTheWrongShape) {
  test::TempDir dir;
  const auto path = dir.write("p.csv", std::string(kHeader) + profile_csv(truth_off_family, profile_plan(1215), "vgg19", 3));
  const auto rows = read_profile_csv(path);
  const auto full = fit_predictor(rows);
  const auto& r = full.report();
  print("off-family truth", r);
  EXPECT_LT(r.held_out_throughput.mape_pct, r.held_out_throughput_prior.mape_pct);
  EXPECT_LT(r.held_out_power.mape_pct, r.held_out_power_prior.mape_pct);
  EXPECT_LT(r.held_out_throughput.mape_pct, 4.0);
  EXPECT_LT(r.held_out_power.mape_pct, 3.0);
  FitOptions priors_only;
  priors_only.residual_regressor = false;
  const auto bare = fit_predictor(rows, priors_only);
  EXPECT_TRUE(bare.clock_models()[0].throughput_residual.empty());
  EXPECT_DOUBLE_EQ(bare.report().held_out_throughput.mape_pct, bare.report().held_out_throughput_prior.mape_pct);
}

TEST_F(FittedPredictorTest, SavedAndLoadedPredictsIdentically) {
  const auto& p = in_family();
  test::TempDir dir;
  const auto path = dir.file("model.json");
  p.save(path);
  const auto loaded = FittedPredictor::load(path);
  EXPECT_EQ(loaded.to_json(), p.to_json());
  EXPECT_EQ(loaded.model(), "resnet50");
  EXPECT_EQ(loaded.report().notes, p.report().notes);
  EXPECT_DOUBLE_EQ(loaded.report().held_out_power.mape_pct, p.report().held_out_power.mape_pct);
  for (const auto& c : unseen_configs(1215)) {
    const auto a = p.predict(c.shares_pct, c.batches, c.f_mhz, c.mem_mhz);
    const auto b = loaded.predict(c.shares_pct, c.batches, c.f_mhz, c.mem_mhz);
    EXPECT_EQ(a.throughput_img_s, b.throughput_img_s);
    EXPECT_EQ(a.power_w, b.power_w);
    EXPECT_EQ(a.u_sm_pct, b.u_sm_pct);
    EXPECT_EQ(a.u_mem_pct, b.u_mem_pct);
  }
  const auto json = read_text_file(path);
  EXPECT_NE(json.find("\"format\": \"gpucap-predictor\""), std::string::npos);
  EXPECT_NE(json.find("\"version\": 1"), std::string::npos);
}

TEST(FittedPredictor, SameProfileGivesTheSameModelBytes) {
  test::TempDir dir;
  const auto path = dir.write("p.csv", std::string(kHeader) + profile_csv(truth_in_family, profile_plan(1215), "m", 9));
  const auto rows = read_profile_csv(path);
  const auto a = fit_predictor(rows).to_json();
  const auto b = fit_predictor(read_profile_csv(path)).to_json();
  EXPECT_EQ(a, b);
}

TEST(FittedPredictor, OneFitPerMemoryClock) {
  test::TempDir dir;
  auto plan = profile_plan(1215);
  for (auto c : profile_plan(877)) plan.push_back(c);
  const auto path = dir.write("p.csv", std::string(kHeader) + profile_csv(truth_in_family, plan, "m", 4));
  const auto p = fit_predictor(read_profile_csv(path));
  EXPECT_EQ(p.memory_clocks_mhz(), (std::vector<double>{877, 1215}));
  EXPECT_LT(p.report().held_out_throughput.mape_pct, 3.0);
  // A memory-bound mix runs slower at the lower memory clock.
  const std::vector<double> shares = {25, 25, 25, 25};
  const std::vector<int> batches = {64, 64, 64, 64};
  const auto slow = p.predict(shares, batches, 1410, 877);
  const auto fast = p.predict(shares, batches, 1410, 1215);
  EXPECT_LT(slow.throughput_img_s, fast.throughput_img_s);
  expect_error_from([&] { (void)p.predict(shares, batches, 1410, 5001); }, ErrorCode::usage,
                    "no fit for memory clock 5001 MHz; fitted: 877, 1215 MHz");
}

TEST(FittedPredictor, ModelSelectionAndTooFewRows) {
  test::TempDir dir;
  const auto two = dir.write("two.csv", std::string(kHeader) + profile_csv(truth_in_family, profile_plan(1215), "a", 1) +
                                            profile_csv(truth_in_family, profile_plan(1215), "b", 2));
  const auto rows = read_profile_csv(two);
  expect_error_from([&] { (void)fit_predictor(rows); }, ErrorCode::usage, "the profile holds 2 models (a, b)");
  FitOptions options;
  options.model = "resnet18";
  expect_error_from([&] { (void)fit_predictor(rows, options); }, ErrorCode::usage,
                    "no rows of model 'resnet18'; it holds: a, b");
  const auto plan = profile_plan(1215);
  const auto few_plan = std::vector<Config>(plan.begin(), plan.begin() + 12);
  const auto few = dir.write("few.csv", std::string(kHeader) + profile_csv(truth_in_family, few_plan, "a", 1));
  expect_error_from([&] { (void)fit_predictor(read_profile_csv(few)); }, ErrorCode::invalid_data,
                    "only 12 usable rows of a at memory clock 1215 MHz; at least 20 are needed");
  const auto oom = dir.write("oom.csv", std::string(kHeader) + "a,[50],[512],1410,1215,0,0,0,0,0,0\n");
  expect_error_from([&] { (void)fit_predictor(read_profile_csv(oom)); }, ErrorCode::invalid_data,
                    "no usable rows of a (1 out-of-memory, 0 idle)");
}

TEST(FittedPredictor, OneSmClockOnlyIsFittedWithAssumedClockScalingAndSaysSo) {
  test::TempDir dir;
  std::vector<Config> plan;
  for (const auto& c : profile_plan(1215)) {
    if (c.f_mhz == 1410.0) plan.push_back(c);
  }
  const auto path = dir.write("p.csv", std::string(kHeader) + profile_csv(truth_in_family, plan, "m", 5));
  const auto p = fit_predictor(read_profile_csv(path));
  ASSERT_FALSE(p.report().notes.empty());
  EXPECT_NE(p.report().notes.front().find("one SM clock only"), std::string::npos) << p.report().notes.front();
  EXPECT_LT(p.report().held_out_throughput.mape_pct, 3.0);
  const std::vector<double> shares = {50, 50};
  const std::vector<int> batches = {32, 32};
  EXPECT_LT(p.predict(shares, batches, 900, 1215).power_w, p.predict(shares, batches, 1410, 1215).power_w);
}

// The partitioner's SolveFreq bisects on power over the SM clock: it must rise with the clock.
TEST_F(FittedPredictorTest, PowerAndThroughputRiseWithTheClock) {
  const auto& p = in_family();
  for (const auto& c : unseen_configs(1215)) {
    if (c.f_mhz != 1410.0) continue;
    double last_power = 0.0, last_throughput = 0.0;
    for (double f = 210.0; f <= 1410.0; f += 15.0) {
      const auto r = p.predict(c.shares_pct, c.batches, f, 1215);
      EXPECT_GE(r.power_w, last_power) << f;
      EXPECT_GE(r.throughput_img_s, last_throughput) << f;
      last_power = r.power_w;
      last_throughput = r.throughput_img_s;
    }
  }
}

TEST_F(FittedPredictorTest, PredictRejectsBadInput) {
  const auto& p = in_family();
  const std::vector<double> shares = {50, 60};
  const std::vector<int> batches = {8, 8};
  expect_error_from([&] { (void)p.predict(shares, batches, 1410, 1215); }, ErrorCode::usage, "add up to 110 %");
  expect_error_from([&] { (void)p.predict(std::vector<double>{50}, batches, 1410, 1215); }, ErrorCode::usage,
                    "1 MPS shares but 2 batch sizes");
  expect_error_from([&] { (void)p.predict(std::vector<double>{}, std::vector<int>{}, 1410, 1215); }, ErrorCode::usage,
                    "at least one tenant");
  expect_error_from([&] { (void)p.predict(std::vector<double>{50}, std::vector<int>{0}, 1410, 1215); },
                    ErrorCode::usage, "batch size 0");
  expect_error_from([&] { (void)p.predict(std::vector<double>{50}, std::vector<int>{8}, 0, 1215); }, ErrorCode::usage,
                    "SM clock 0 MHz");
  expect_error_from([&] { (void)p.predict(std::vector<double>{50}, std::vector<int>{8}, 1410, 9501); },
                    ErrorCode::usage, "fitted: 1215 MHz");
}

TEST_F(FittedPredictorTest, CorruptModelFilesAreRejectedWithTheirName) {
  test::TempDir dir;
  const auto text = in_family().to_json();
  const auto fails = [&](const std::string& content, ErrorCode code, const std::string& fragment) {
    const auto path = dir.write("m.json", content);
    expect_error_from([&] { (void)FittedPredictor::load(path); }, code, fragment);
  };
  fails("{\"format\": \"gpucap-predictor\", ", ErrorCode::invalid_data, "m.json: not a gpucap predictor: invalid JSON");
  fails("{\"format\": \"pctodl-gbr/1\"}", ErrorCode::invalid_data, "m.json: not a gpucap predictor");
  fails("[]", ErrorCode::invalid_data, "not a gpucap predictor");
  auto json = nlohmann::json::parse(text);
  json["version"] = 2;
  fails(json.dump(), ErrorCode::invalid_data, "version: 2 is not supported");
  json = nlohmann::json::parse(text);
  json["memory_clocks"][0]["throughput"]["work_s"] = -1;
  fails(json.dump(), ErrorCode::invalid_data, "memory_clocks[0].throughput.work_s: must be > 0");
  json = nlohmann::json::parse(text);
  json["memory_clocks"][0]["power_residual"]["alpha"].push_back(1.0);
  fails(json.dump(), ErrorCode::invalid_data, "power_residual.basis: must hold one vector per alpha");
  json = nlohmann::json::parse(text);
  json["memory_clocks"][0]["throughput_residual"]["features"][0] = "clock";
  fails(json.dump(), ErrorCode::invalid_data, "throughput_residual.features: expected [clock_ratio");
  json = nlohmann::json::parse(text);
  json["memory_clocks"][0]["throughput_residual"]["basis"][0][3] = "x";
  fails(json.dump(), ErrorCode::invalid_data, "throughput_residual.basis: must contain only numbers");
  expect_error_from([&] { (void)FittedPredictor::load(dir.file("none.json")); }, ErrorCode::io, "none.json");
}

TEST(FittedPredictor, SaveWritesNothingWhenItCannotWrite) {
  test::TempDir dir;
  const auto path = dir.write("p.csv", std::string(kHeader) + profile_csv(truth_in_family, profile_plan(1215), "m", 6));
  const auto p = fit_predictor(read_profile_csv(path));
  const auto target = dir.file("no/such/folder/model.json");
  expect_error_from([&] { p.save(target); }, ErrorCode::io, "model.json");
  EXPECT_FALSE(std::filesystem::exists(target));
}

// ---------------------------------------------------------------------------------------------
// As the partitioner's predictor

TEST_F(FittedPredictorTest, DrivesTheGreedyPartitioner) {
  const auto predictor = as_partition_predictor(in_family());
  tune::PartitionSpace space;
  for (double f = 210; f <= 1410; f += 15) space.sm_clocks_mhz.push_back(f);
  space.memory_clocks_mhz = {1215};
  space.mps_step_pct = 25;
  space.bisection_high_mhz = 1410;
  for (const double cap : {120.0, 180.0, 250.0}) {
    const auto greedy = tune::greedy_partition(space, predictor, cap);
    ASSERT_TRUE(greedy.best.has_value()) << cap;
    const auto& best = *greedy.best;
    EXPECT_LE(best.predicted.power_w, cap);
    EXPECT_GT(best.predicted.throughput_img_s, 0.0);
    std::vector<double> shares;
    std::vector<int> batches;
    for (const auto& t : best.tenants) {
      shares.push_back(t.share_pct);
      batches.push_back(t.batch);
    }
    const auto direct = in_family().predict(shares, batches, best.sm_clock_mhz, best.memory_clock_mhz);
    EXPECT_DOUBLE_EQ(direct.throughput_img_s, best.predicted.throughput_img_s);
    const auto exhaustive = tune::exhaustive_partition(space, predictor, cap);
    ASSERT_TRUE(exhaustive.best.has_value());
    EXPECT_GE(best.predicted.throughput_img_s, 0.85 * exhaustive.best->predicted.throughput_img_s) << cap;
  }
  expect_error_from([&] { (void)predictor({{50, 8}}, 1410, 5001); }, ErrorCode::usage, "fitted: 1215 MHz");
}

TEST_F(FittedPredictorTest, PredictionIsFast) {
  const auto& p = in_family();
  const std::vector<double> shares = {25, 25, 25, 25};
  const std::vector<int> batches = {16, 32, 16, 64};
  constexpr int kCalls = 20000;
  double sink = 0.0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) sink += p.predict(shares, batches, 600.0 + (i % 800), 1215).power_w;
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kCalls;
  RecordProperty("predict_us", std::to_string(us));
  std::printf("fitted predictor: %.2f us per 4-tenant prediction\n", us);
  EXPECT_GT(sink, 0.0);
  EXPECT_LT(us, 200.0) << "generous: sanitizer builds are slow; release builds take a few µs";
}

}  // namespace
}  // namespace gpucap::predict
