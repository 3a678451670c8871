#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "gpucap/calibrate/calibration.hpp"
#include "gpucap/calibrate/pctodl_source.hpp"
#include "gpucap/calibrate/published_source.hpp"
#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::calibrate {
namespace {

const sim::Catalog& catalog() {
  static const auto instance = sim::Catalog::load(test::data_dir());
  return instance;
}

TEST(PctodlSource, GridOfTwoQuantitiesWithAFifthHeldOut) {
  const auto observations = pctodl_observations(test::shared_file("pctodl"), catalog());
  // (2 RTX 3080 Ti sets x 7 models + A100 x 6 models, maxvit_t's copy left out) x 6 batches x 10 clocks x 2
  EXPECT_EQ(observations.size(), (2u * 7u + 6u) * 6u * 10u * 2u);
  std::size_t held_out = 0;
  const auto params = TwinParams::from(catalog());
  for (const auto& o : observations) {
    held_out += o.group == "held-out" ? 1u : 0u;
    EXPECT_TRUE(std::isfinite(o.predict(params))) << o.label;
    EXPECT_EQ(o.label.find("a100 maxvit_t"), std::string::npos);
  }
  EXPECT_EQ(held_out, observations.size() / 5);
}

TEST(PctodlSource, TheFitAgainstItselfPredictsEachInteriorBatchFromItsNeighbours) {
  const auto errors = pctodl_neighbour_errors(test::shared_file("pctodl"), catalog());
  // Batches 16, 32, 64, 128 at ten clocks: 3080 Ti 2 memory clocks × 7 models, A100 6 models.
  const std::pair<std::string, std::string> ti{"pctodl-rtx3080ti", "throughput_img_s"};
  const std::pair<std::string, std::string> a100{"pctodl-a100", "throughput_img_s"};
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors.at(ti).size(), 2u * 7u * 10u * 4u);
  EXPECT_EQ(errors.at(a100).size(), 6u * 10u * 4u);
  const auto stats = error_stats(errors.at(a100));
  // The published A100 fit is uneven along batch size (MnasNet alternates by about 10 %).
  EXPECT_GT(stats.mape, 2.0);
  EXPECT_LT(stats.mape, 20.0);
  for (const auto& [key, values] : errors) {
    for (const double e : values) EXPECT_TRUE(std::isfinite(e) && e >= 0.0) << key.first << " " << key.second;
  }
}

TEST(PctodlSource, FidelityReportsTheFittedPointsApartAsInSample) {
  FidelityOptions options;
  options.sources = {Source::pctodl};
  options.paths.pctodl_params = test::shared_file("pctodl");
  const auto report = measure_fidelity(catalog(), options);
  const auto row = [&](const std::string& source, const std::string& quantity) -> const FidelityRow* {
    const auto it = std::find_if(report.rows.begin(), report.rows.end(), [&](const FidelityRow& r) {
      return r.source == source && r.quantity == quantity;
    });
    return it == report.rows.end() ? nullptr : &*it;
  };
  for (const std::string gpu : {"pctodl-rtx3080ti", "pctodl-a100"}) {
    for (const std::string quantity : {"throughput_img_s", "power_w"}) {
      const auto* held_out = row(gpu, quantity);
      const auto* fitted = row(gpu + " in-sample", quantity);
      ASSERT_NE(held_out, nullptr) << gpu << " " << quantity;
      ASSERT_NE(fitted, nullptr) << gpu << " in-sample " << quantity;
      EXPECT_EQ(held_out->target_mape_pct, 5.0);
      EXPECT_FALSE(fitted->target_mape_pct.has_value()) << "a diagnostic, not a target";
      EXPECT_EQ(fitted->stats.n, 4u * held_out->stats.n) << "four fifths fitted, one held out";
      EXPECT_GT(fitted->stats.mape, 0.0);
      EXPECT_LT(fitted->stats.mape, 50.0);
    }
  }
  const auto markdown = fidelity_markdown(report, catalog(), "cmd");
  EXPECT_NE(markdown.find("The twin's error on the very points it is fitted to is"), std::string::npos);
}

TEST(PublishedSource, CurvesLoadAndMalformedOnesAreNamed) {
  const auto curves = load_published_curves(test::data_dir() + "/calibration/published.json", catalog());
  ASSERT_GE(curves.size(), 4u);
  const auto observations = published_observations(curves);
  const auto params = TwinParams::from(catalog());
  for (const auto& o : observations) EXPECT_TRUE(std::isfinite(o.predict(params))) << o.label;
  test::TempDir dir;
  const auto bad = dir.write("p.json", R"({"curves": [{"id": "x", "use": "maybe", "gpu": "v100", "model": "resnet50",
      "precision": "fp32", "x": "batch", "y": "throughput_img_s", "source": "s", "points": [[1, 2]]}]})");
  try {
    (void)load_published_curves(bad, catalog());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("curves[0].use"), std::string::npos) << e.what();
  }
  const auto no_points = dir.write("q.json", R"({"curves": [{"id": "x", "use": "fit", "gpu": "v100",
      "model": "resnet50", "precision": "fp32", "x": "batch", "y": "throughput_img_s", "source": "s", "points": []}]})");
  EXPECT_THROW((void)load_published_curves(no_points, catalog()), Error);
}

TEST(Calibration, SourcesParseAndPriorsRestore) {
  EXPECT_EQ(parse_sources("all").size(), 5u);
  EXPECT_EQ(parse_sources("real").front(), Source::real);
  EXPECT_EQ(parse_sources("p40, published").size(), 2u);
  EXPECT_THROW((void)parse_sources("p40,p40"), Error);
  EXPECT_THROW((void)parse_sources("mlperf"), Error);
  auto current = TwinParams::from(catalog());
  const FitParameter p{FileKind::gpu, "p40", "power_model.sm_dynamic_w", 1, 1000, 0};
  current.gpus.at("p40").power.sm_dynamic_w = 999.0;
  const auto restored = at_priors(current, catalog(), {p});
  const auto& priors = catalog().gpu("p40").priors;
  if (priors.count(p.key) != 0) {
    EXPECT_DOUBLE_EQ(restored.gpus.at("p40").power.sm_dynamic_w, priors.at(p.key));
  } else {
    EXPECT_DOUBLE_EQ(restored.gpus.at("p40").power.sm_dynamic_w, 999.0);
  }
}

TEST(Calibration, ErrorStatistics) {
  const auto stats = error_stats({0.01, 0.02, 0.03, 0.04, 0.10});
  EXPECT_EQ(stats.n, 5u);
  EXPECT_NEAR(stats.median_ape, 3.0, 1e-9);
  EXPECT_NEAR(stats.p90_ape, 7.6, 1e-9);
  EXPECT_NEAR(stats.mape, 4.0, 1e-9);
}

TEST(Calibration, FidelityOfAFolderOfLogsWithTheCurrentFiles) {
  test::TempDir dir;
  const auto logs = test::shared_file("batchdvfs-p40/dvfs256");
  std::filesystem::create_directories(dir.file("nvidia-smi"));
  for (const char* stem : {"13_ResNetV2_50_DVFS", "15_ResNetV2_152_DVFS"}) {
    std::filesystem::copy(logs + "/" + stem + ".csv", dir.file(std::string(stem) + ".csv"));
    std::filesystem::copy(logs + "/nvidia-smi/" + stem + ".txt_nvidiasmi_output.csv",
                          dir.file(std::string("nvidia-smi/") + stem + ".txt_nvidiasmi_output.csv"));
  }
  FidelityOptions options;
  options.sources = {Source::p40};
  options.paths.p40_logs = dir.path();
  options.p40_cross_validate = false;
  const auto report = measure_fidelity(catalog(), options);
  EXPECT_EQ(report.p40_runs.size(), 2u);
  EXPECT_GT(report.p40_power.n, 80u);
  EXPECT_LT(report.p40_power.median_ape, 10.0) << "heavy models at batch 256: compute phases always caught";
  const auto text = fidelity_text(report);
  const auto last = text.substr(text.rfind('\n', text.size() - 2) + 1);
  EXPECT_EQ(last.rfind("p40 power median_ape=", 0), 0u) << last;
  const auto markdown = fidelity_markdown(report, catalog(), "cmd");
  EXPECT_NE(markdown.find("| p40 | window_max_power_w |"), std::string::npos);
  // The signed error by clock and batch band holds every window once; batch 256 only here.
  const auto table = markdown.find("| clock | batch 1–4 | 5–16 | 17–64 | ≥ 65 |");
  ASSERT_NE(table, std::string::npos);
  const auto rows = markdown.substr(table, markdown.find("\n\n", table) - table);
  std::size_t counted = 0;
  const std::regex cell(R"(\(([0-9]+)\) \|)");
  for (auto it = std::sregex_iterator(rows.begin(), rows.end(), cell); it != std::sregex_iterator(); ++it) {
    counted += std::stoul((*it)[1].str());
  }
  EXPECT_EQ(counted, report.p40_power.n);
  EXPECT_NE(rows.find("| ≥ 1,350 MHz | – | – | – | "), std::string::npos) << rows;
  // The distribution-level row: one error per (job, batch, clock) with enough windows — the DVFS
  // runs hold batch 256 and walk the clock ladder, so a few groups, each of many windows.
  const auto group = std::find_if(report.rows.begin(), report.rows.end(),
                                  [](const FidelityRow& r) { return r.source == "p40 (group medians)"; });
  ASSERT_NE(group, report.rows.end());
  EXPECT_GE(group->stats.n, 2u);
  EXPECT_LT(group->stats.n, report.p40_power.n / 5) << "groups, not windows";
  EXPECT_EQ(group->target_median_pct, 5.0);
  // Its floor: each group of at least ten windows split in halves, the log against itself.
  const auto own = std::find_if(report.rows.begin(), report.rows.end(),
                                [](const FidelityRow& r) { return r.source == "p40 (group medians) log vs itself"; });
  ASSERT_NE(own, report.rows.end());
  EXPECT_GE(own->stats.n, 1u);
  EXPECT_LE(own->stats.n, group->stats.n);
  EXPECT_FALSE(own->target_median_pct.has_value()) << "a floor, not a target";
  EXPECT_NE(markdown.find("The log's own spread at one configuration"), std::string::npos);
  EXPECT_TRUE(report.p40_run_times.empty()) << "no runtimes.csv in the folder";

  // With the harness's run times beside the logs: jobs 13 and 15, three approaches each.
  std::filesystem::copy(test::shared_file("batchdvfs-p40/runtimes.csv"), dir.file("runtimes.csv"));
  const auto timed = measure_fidelity(catalog(), options);
  ASSERT_EQ(timed.p40_run_times.size(), 6u);
  for (const auto& t : timed.p40_run_times) {
    EXPECT_TRUE(t.job == 13 || t.job == 15) << t.job;
    EXPECT_GT(t.twin_s, 0.5 * t.logged_s) << t.job << " " << t.approach << ": a whole dataset, not a few batches";
    // Clipper's additive search stops where the window maximum enters its band: a twin a few
    // percent low at large batches keeps it searching, and autotuning every new batch size
    // (job 15: 2.4 times the logged time).
    EXPECT_LT(t.twin_s, (t.approach == "clipper" ? 2.5 : 2.0) * t.logged_s) << t.job << " " << t.approach;
  }
  EXPECT_NE(fidelity_markdown(timed, catalog(), "cmd").find("## P40 whole-job run times"), std::string::npos);
}

}  // namespace
}  // namespace gpucap::calibrate
