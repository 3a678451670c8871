#include <gtest/gtest.h>

#include <filesystem>

#include "gpucap/calibrate/calibration.hpp"
#include "gpucap/calibrate/real_source.hpp"
#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::calibrate {
namespace {

const sim::Catalog& catalog() {
  static const auto instance = sim::Catalog::load(test::data_dir());
  return instance;
}

std::string repository_setup() { return test::data_dir() + "/calibration/real.json"; }

// A trial file as `gpucap tune --platform nvml --out` writes it (the setup: only the fields the
// source reads).
std::string sweep(const std::string& model, const std::string& precision, const std::string& trials,
                  bool locked = false) {
  return R"({"setup": {"gpu": "NVIDIA H200", "model_file": "/tmp/models/)" + model + R"(.pt", "precision": ")" +
         precision + R"(", "clocks_locked": )" + (locked ? "true" : "false") + R"(}, "trials": [)" + trials + "]}";
}

std::string trial(int batch, double throughput, double mean_w, double max_w) {
  return "{\"batch_size\": " + std::to_string(batch) +
         ", \"sm_clock_mhz\": 1980, \"memory_clock_mhz\": null, \"throughput_img_s\": " + std::to_string(throughput) +
         ", \"max_power_w\": " + std::to_string(max_w) + ", \"mean_power_w\": " + std::to_string(mean_w) +
         ", \"cost_s\": 3.0, \"measured_sm_clock_mhz\": 1980, \"measured_memory_clock_mhz\": 3201}";
}

// A setup of two folders (fit, check) in a temporary directory.
struct TwoFolders {
  test::TempDir dir;
  std::string setup;
  TwoFolders(const std::string& fit_sweep, const std::string& check_sweep) {
    std::filesystem::create_directories(dir.file("a"));
    std::filesystem::create_directories(dir.file("b"));
    (void)dir.write("a/sweep-resnet50-fp16.json", fit_sweep);
    (void)dir.write("b/sweep-resnet50-fp16.json", check_sweep);
    setup = dir.write("real.json", R"({"folders": [{"path": "a", "gpu": "h200", "use": "fit"},
                                                 {"path": "b", "gpu": "h200-sxm", "use": "check"}]})");
  }
};

TEST(RealSource, TheRepositorysH200SweepsLoadAsFittedAndHeldOutPoints) {
  const auto points = load_real_sweeps(repository_setup(), catalog());
  // Run 1: 3 models x 2 precisions x 5 batch sizes; run 2: ResNet-50 FP16 at 9, the others at 4.
  ASSERT_EQ(points.size(), 30u + 9u + 5u * 4u);
  std::size_t fitted = 0;
  for (const auto& p : points) {
    fitted += p.use == "fit" ? 1u : 0u;
    EXPECT_EQ(p.gpu, "h200");
    EXPECT_GE(p.max_power_w, p.mean_power_w);
  }
  EXPECT_EQ(fitted, 30u);
  const auto observations = real_observations(points);
  ASSERT_EQ(observations.size(), 3u * points.size());
  const auto params = TwinParams::from(catalog());
  for (const auto& o : observations) {
    EXPECT_TRUE(std::isfinite(o.predict(params)) && o.predict(params) > 0.0) << o.label;
    // The highest single reading is compared, never fitted.
    if (o.quantity == "window_max_power_w") {
      EXPECT_EQ(o.group, "check") << o.label;
    }
  }
}

TEST(RealSource, TheTwinRunsAPointAtItsBoostClockUnderTheBoardLimit) {
  RealSweepPoint small{"f", "fit", "h200", "resnet50", sim::Precision::fp16, 1, 1.0, 1.0, 1.0};
  RealSweepPoint large = small;
  large.batch = 256;
  const auto params = TwinParams::from(catalog());
  const auto a = predict_real_point(params, small);
  const auto b = predict_real_point(params, large);
  EXPECT_GT(b.throughput_img_s, a.throughput_img_s);
  EXPECT_GT(b.mean_power_w, a.mean_power_w);
  EXPECT_LE(b.mean_power_w, params.gpus.at("h200").power_limit_default_w * 1.001);
  EXPECT_GE(a.max_power_w, a.mean_power_w);
}

TEST(RealSource, FittingTheFittedFolderBringsTheHeldOutOneCloserThanThePriors) {
  FidelityOptions options;
  options.sources = {Source::real};
  options.paths.real_sweeps = repository_setup();
  const auto report = measure_fidelity(catalog(), options);
  ASSERT_EQ(report.real.size(), 59u);
  const auto row = [&](const std::string& source, const std::string& quantity) {
    for (const auto& r : report.rows) {
      if (r.source == source && r.quantity == quantity) return r.stats;
    }
    ADD_FAILURE() << "no row " << source << " " << quantity;
    return ErrorStats{};
  };
  // The held-out folder at the twin's priors (the hand estimates the data files keep).
  const auto points = load_real_sweeps(repository_setup(), catalog());
  const auto parameters = real_fit_parameters(points, catalog());
  const auto priors = at_priors(TwinParams::from(catalog()), catalog(), parameters);
  std::vector<double> prior_errors;
  for (const auto& p : points) {
    if (p.use == "check") prior_errors.push_back(ape(predict_real_point(priors, p).throughput_img_s, p.throughput_img_s));
  }
  const auto held_out = row("real-h200 (held out)", "throughput_img_s");
  EXPECT_EQ(held_out.n, 29u);
  EXPECT_LT(held_out.mape, 0.5 * error_stats(prior_errors).mape);
  EXPECT_LT(held_out.mape, 20.0);
  EXPECT_LT(row("real-h200 (held out)", "mean_power_w").mape, 20.0);
  // ResNet-50 FP16 at batch 1, 4, 16, 64, 256 was measured on both machines.
  EXPECT_EQ(row("real-h200 vs itself", "throughput_img_s").n, 5u);
  const auto markdown = fidelity_markdown(report, catalog(), "cmd");
  EXPECT_NE(markdown.find("## Real GPUs"), std::string::npos);
  EXPECT_NE(markdown.find("**Where the twin misses on real GPUs**"), std::string::npos);
  EXPECT_NE(markdown.find("Mean power: h200 "), std::string::npos);
  EXPECT_NE(markdown.find("| 2026-11-26-NVIDIA_H200-run2 (held out) | resnet50 | fp16 | 128 |"), std::string::npos);
}

TEST(RealSource, RepeatedPointsGiveTheMeasurementsOwnSpread) {
  TwoFolders folders(sweep("resnet50", "fp16", trial(8, 1000, 200, 210)),
                     sweep("resnet50", "fp16", trial(8, 1100, 190, 200) + "," + trial(16, 2000, 250, 260)));
  const auto points = load_real_sweeps(folders.setup, catalog());
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[1].gpu, "h200");  // the alias names the catalogue's GPU
  const auto errors = real_repeat_errors(points);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NEAR(errors.at({"real-h200 vs itself", "throughput_img_s"}).at(0), 0.1, 1e-9);
  EXPECT_NEAR(errors.at({"real-h200 vs itself", "mean_power_w"}).at(0), 0.05, 1e-9);
}

TEST(RealSource, BadSetupsAndTrialFilesAreNamed) {
  const auto good = trial(8, 1000, 200, 210);
  const auto message = [](const std::string& setup) {
    try {
      (void)load_real_sweeps(setup, catalog());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  {
    TwoFolders f(sweep("resnet50", "fp16", good), sweep("resnet50", "fp16", good, /*locked=*/true));
    EXPECT_NE(message(f.setup).find("locked clocks"), std::string::npos) << message(f.setup);
  }
  {
    TwoFolders f(sweep("resnet50", "bf16", good), sweep("resnet50", "fp16", good));
    EXPECT_NE(message(f.setup).find("'bf16': the twin runs fp32 and fp16 only"), std::string::npos) << message(f.setup);
  }
  {
    TwoFolders f(sweep("resnet50", "fp16", trial(8, 1000, 220, 210)), sweep("resnet50", "fp16", good));
    EXPECT_NE(message(f.setup).find("max_power_w: is below mean_power_w"), std::string::npos) << message(f.setup);
  }
  {
    TwoFolders f(sweep("no_such_net", "fp16", good), sweep("resnet50", "fp16", good));
    EXPECT_NE(message(f.setup).find("no_such_net"), std::string::npos) << message(f.setup);
  }
  {
    TwoFolders f(sweep("resnet50", "fp16", trial(0, 1000, 200, 210)), sweep("resnet50", "fp16", good));
    EXPECT_NE(message(f.setup).find("batch_size"), std::string::npos) << message(f.setup);
  }
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("empty"));
  const auto use = dir.write("use.json", R"({"folders": [{"path": "empty", "gpu": "h200", "use": "maybe"}]})");
  EXPECT_NE(message(use).find("use: must be \"fit\" or \"check\""), std::string::npos) << message(use);
  const auto empty = dir.write("empty.json", R"({"folders": [{"path": "empty", "gpu": "h200", "use": "fit"}]})");
  EXPECT_NE(message(empty).find("holds no sweep-*.json"), std::string::npos) << message(empty);
  const auto missing = dir.write("missing.json", R"({"folders": [{"path": "nowhere", "gpu": "h200", "use": "fit"}]})");
  EXPECT_NE(message(missing).find("is not a folder"), std::string::npos) << message(missing);
  const auto no_gpu = dir.write("gpu.json", R"({"folders": [{"path": "empty", "gpu": "b200", "use": "fit"}]})");
  EXPECT_NE(message(no_gpu).find("b200"), std::string::npos) << message(no_gpu);
  const auto none = dir.write("none.json", R"({"folders": []})");
  EXPECT_NE(message(none).find("folders: must be a non-empty array"), std::string::npos) << message(none);
}

}  // namespace
}  // namespace gpucap::calibrate
