#include "gpucap/calibrate/zeus_source.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "gpucap/calibrate/calibration.hpp"
#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::calibrate {
namespace {

const sim::Catalog& catalog() {
  static const auto instance = sim::Catalog::load(test::data_dir());
  return instance;
}

ZeusSetup setup() { return load_zeus_setup(test::data_dir() + "/calibration/zeus.json", catalog()); }

std::string traces() { return test::shared_file("zeus/nsdi23"); }

constexpr const char* kHeader = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n";

TEST(ZeusSource, EveryRowOfTheFittedAndHeldOutTracesIsTwoObservations) {
  const auto s = setup();
  EXPECT_EQ(s.fit_gpus, (std::vector<std::string>{"v100", "rtx6000"}));
  EXPECT_EQ(s.check_gpus, (std::vector<std::string>{"p100"}));
  EXPECT_EQ(s.derived_gpus, (std::vector<std::string>{"p100"}));
  const auto observations = zeus_observations(s, traces(), catalog());
  // 476 + 410 + 270 rows (the files' lines less their headers), all six workloads mapped: each a
  // time and a power, and the rows at a trace's lowest limit also the over-the-limit check.
  std::map<std::string, std::size_t> by_quantity;
  for (const auto& o : observations) ++by_quantity[o.quantity];
  EXPECT_EQ(by_quantity["time_per_epoch_s"], 476u + 410u + 270u);
  EXPECT_EQ(by_quantity["average_power_w"], 476u + 410u + 270u);
  std::size_t lowest = 0;
  for (const char* gpu : {"v100", "rtx6000", "p100"}) {
    const auto rows = bench::load_zeus_power_rows(bench::zeus_power_trace_path(traces(), gpu));
    double lowest_w = 1e9;
    for (const auto& r : rows) lowest_w = std::min(lowest_w, r.power_limit_w);
    for (const auto& r : rows) lowest += r.power_limit_w == lowest_w ? 1 : 0;
  }
  EXPECT_GT(lowest, 0u);
  EXPECT_EQ(by_quantity["power_over_limit_w"], lowest);
  EXPECT_EQ(by_quantity.size(), 3u);
  const auto params = TwinParams::from(catalog());
  std::size_t check = 0;
  for (const auto& o : observations) {
    if (o.group == "check" && o.quantity != "power_over_limit_w") {
      ++check;
      EXPECT_EQ(o.source, "zeus-p100");
    }
    const double predicted = o.predict(params);
    EXPECT_TRUE(std::isfinite(predicted) && predicted > 0.0) << o.label;
    if (o.quantity == "power_over_limit_w") {
      EXPECT_DOUBLE_EQ(predicted, o.target) << "the calibrated twin holds the lowest limit: " << o.label;
    }
  }
  EXPECT_EQ(check, 2u * 270u);
  // Nothing of the held-out GPU is fitted.
  for (const auto& p : zeus_fit_parameters(s, traces(), catalog())) EXPECT_NE(p.id, "p100") << p.name();
}

TEST(ZeusSource, PaddingIsFittedForSequenceDatasetsOnlyAndPhasesForTrainingModelsOnly) {
  std::set<std::string> padded, phased, busy_small_batches, footprints, allocators, training_fill, training_switching;
  for (const auto& p : zeus_fit_parameters(setup(), traces(), catalog())) {
    if (p.key == "padding_growth") padded.insert(p.id);
    if (p.key == "training_mib_per_sample") footprints.insert(p.id);
    if (p.key == "host.allocator_s") allocators.insert(p.id);
    if (p.key == "power_phase_spread") phased.insert(p.id);
    if (p.key == "power_saturation_scale") busy_small_batches.insert(p.id);
    if (p.key == "training_saturation_scale") training_fill.insert(p.id);
    if (p.key == "training_power_saturation_scale") training_switching.insert(p.id);
  }
  // Images are one size: no padding for CIFAR-100, ImageNet or MovieLens.
  EXPECT_EQ(padded, (std::set<std::string>{"librispeech_train", "sentiment140_train", "squad_train"}));
  // Only batches that change shape take the allocator's time: the padded models' footprints, and
  // the allocator of both fitted testbeds (the held-out P100 keeps its prior).
  EXPECT_EQ(footprints, (std::set<std::string>{"bert_base_seq128", "bert_base_seq384", "deepspeech2"}));
  EXPECT_EQ(allocators, (std::set<std::string>{"v100-pcie", "rtx6000"}));
  // ResNet-50 is shared with the inference sources, whose power keeps following occupancy.
  const std::set<std::string> training_models = {"bert_base_seq128", "bert_base_seq384", "deepspeech2", "ncf",
                                                 "shufflenet_v2_cifar"};
  EXPECT_EQ(phased, training_models);
  EXPECT_EQ(busy_small_batches, training_models);
  EXPECT_DOUBLE_EQ(catalog().model("resnet50").power_saturation_scale, 1.0);
  EXPECT_DOUBLE_EQ(catalog().model("resnet50").power_phase_spread, 0.0);
  // Its training step's small-batch fill and power are its own, fitted here; a training-only
  // model's feature maps and power saturation already say both.
  EXPECT_EQ(training_fill, (std::set<std::string>{"resnet50"}));
  EXPECT_EQ(training_switching, (std::set<std::string>{"resnet50"}));
}

TEST(ZeusSource, TheFirstFittedTestbedIsTheReferenceForHostSpeedAndEfficiency) {
  auto s = setup();
  ASSERT_EQ(s.fit_gpus, (std::vector<std::string>{"v100", "rtx6000"}));
  const auto relative_keys = [&](const ZeusSetup& with) {
    std::map<std::string, std::set<std::string>> keys;
    for (const auto& p : zeus_fit_parameters(with, traces(), catalog())) {
      const bool relative = p.key == "host.training_loop_scale" || p.key.ends_with("_efficiency_scale");
      if (p.kind == FileKind::gpu && relative) keys[p.id].insert(p.key);
      if (p.key == "voltage.knee_mhz") {
        EXPECT_LT(p.upper, catalog().gpu(p.id).max_sm_clock_mhz()) << "the catalogue rejects a knee at the top";
      }
    }
    return keys;
  };
  // The V100 is the reference: a GPU fitted to no trace runs like it for its datasheet peak.
  // Only the precisions the workloads train in are fitted (DeepSpeech2 with AMP, the rest FP32).
  EXPECT_EQ(relative_keys(s), (std::map<std::string, std::set<std::string>>{
                                  {"rtx6000", {"host.training_loop_scale", "fp32_efficiency_scale",
                                               "fp16_efficiency_scale"}}}));
  for (auto& w : s.workloads) w.precision = sim::Precision::fp32;
  EXPECT_EQ(relative_keys(s), (std::map<std::string, std::set<std::string>>{
                                  {"rtx6000", {"host.training_loop_scale", "fp32_efficiency_scale"}}}));
}

TEST(ZeusSource, AnUnfittedGpuTakesTheReferencesPowerBySiliconAndTheTestbedsMeanHost) {
  const auto s = setup();
  const auto fitted = zeus_fitted_twin_gpus(s, traces(), catalog());
  ASSERT_EQ(fitted, (std::vector<std::string>{"v100-pcie", "rtx6000"}));
  auto params = TwinParams::from(catalog());
  auto& v100 = params.gpus.at("v100-pcie");
  v100.power.sm_dynamic_w = 200.0;
  v100.power.static_w = 8.0;
  v100.power.memory_dynamic_w = 30.0;
  v100.power.constant_w = 12.0;
  v100.host.training_loop_scale = 1.0;
  v100.host.layer_launch_s = 1e-4;
  params.gpus.at("rtx6000").host.training_loop_scale = 4.0;
  params.gpus.at("rtx6000").host.layer_launch_s = 4e-4;
  params.gpus.at("rtx6000").fp32_efficiency_scale = 0.81;
  params.gpus.at("rtx6000").power.sm_dynamic_w = 999.0;  // only the reference's power carries over
  derive_unfitted_gpus(s, fitted, params);
  const auto& p100 = params.gpus.at("p100");
  // 56 SMs at 1,329 MHz against 80 at 1,380; 732 GB/s against 900.
  EXPECT_NEAR(p100.power.sm_dynamic_w, 200.0 * (56.0 * 1329.0) / (80.0 * 1380.0), 1e-9);
  EXPECT_NEAR(p100.power.static_w, 8.0 * 56.0 / 80.0, 1e-9);
  EXPECT_NEAR(p100.power.memory_dynamic_w, 30.0 * 732.0 / 900.0, 1e-9);
  EXPECT_DOUBLE_EQ(p100.power.constant_w, 12.0);
  EXPECT_NEAR(p100.host.training_loop_scale, 2.0, 1e-12);  // the geometric mean of 1 and 4
  EXPECT_NEAR(p100.host.layer_launch_s, 2e-4, 1e-15);
  EXPECT_NEAR(p100.fp32_efficiency_scale, 0.9, 1e-12);  // the V100's 1 and the RTX 6000's 0.81
  // Nothing else of it moves, and the fitted testbeds stay as they were.
  EXPECT_DOUBLE_EQ(p100.voltage.knee_mhz, catalog().gpu("p100").voltage.knee_mhz);
  EXPECT_DOUBLE_EQ(params.gpus.at("rtx6000").power.sm_dynamic_w, 999.0);
  // The derived keys are the ones calibration writes.
  std::set<std::string> keys;
  for (const auto& p : zeus_derived_parameters(s, fitted)) {
    EXPECT_EQ(p.id, "p100");
    keys.insert(p.key);
  }
  EXPECT_EQ(keys.size(), 11u);
  EXPECT_TRUE(keys.contains("power_model.sm_dynamic_w") && keys.contains("host.training_loop_scale") &&
              keys.contains("fp16_efficiency_scale"))
      << keys.size();
  // A fitted testbed cannot also be derived.
  auto both = s;
  both.derived_gpus = {"rtx6000"};
  EXPECT_THROW(derive_unfitted_gpus(both, fitted, params), Error);
  try {
    (void)zeus_derived_parameters(both, fitted);  // before any fit
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find("'rtx6000' is both fitted to a trace and derived"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)zeus_derived_parameters(s, {}), Error) << "nothing fitted to derive from";
  // The calibration problem derives after the fit.
  const auto problem = build_problem(Source::zeus, catalog(), default_source_paths(test::data_dir(), test::shared_data_dir()));
  ASSERT_TRUE(problem.derive);
  EXPECT_EQ(problem.derived.size(), 11u);
}

TEST(ZeusSource, TheTwinNeverAveragesAboveTheLimitOnAnyTrace) {
  const auto s = setup();
  const auto params = TwinParams::from(catalog());
  for (const char* gpu : {"v100", "rtx6000", "p100"}) {
    const auto f = compare_zeus_trace(params, catalog(), s, traces() + "/summary_power_" + gpu + ".csv");
    EXPECT_EQ(f.skipped_rows, 0u) << gpu;
    for (const auto& p : f.points) {
      EXPECT_LE(p.twin.average_power_w, p.row.power_limit_w + 1e-9) << gpu << " " << p.row.dataset << " bs "
                                                                      << p.row.batch_size << " at " << p.row.power_limit_w;
    }
    EXPECT_LE(f.twin_excess_w, std::max(0.0, f.real_excess_w)) << gpu;
    EXPECT_GT(f.time_floor.n, 0u) << gpu;  // every trace has configurations the limit cannot matter to
  }
}

TEST(ZeusSource, TheTraceGpuIsTheTwinGpuThatTakesItsLimits) {
  const std::vector<bench::ZeusPowerRow> rows = {{"imagenet", "resnet50", "adadelta", 64, 100.0, 1.0, 1.0, 2},
                                                 {"imagenet", "resnet50", "adadelta", 64, 250.0, 1.0, 1.0, 3}};
  EXPECT_EQ(zeus_twin_gpu(catalog(), "v100", rows).id, "v100-pcie");  // the SXM2 twin starts at 150 W
  EXPECT_EQ(zeus_twin_gpu(catalog(), "a40", rows).id, "a40");
  try {
    (void)zeus_twin_gpu(catalog(), "v100", rows, std::string("v100"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find("100-250 W"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)zeus_twin_gpu(catalog(), "k80", rows), Error);
}

TEST(ZeusSource, ATraceIsComparedRowByRowAndUnknownWorkloadsAreCounted) {
  test::TempDir dir;
  const auto path = dir.write("summary_power_v100.csv", std::string(kHeader) +
                                                            "imagenet,resnet50,256,adadelta,250,3515,220\n"
                                                            "imagenet,resnet50,256,adadelta,100,6781,98\n"
                                                            "cifar10,vgg11,64,sgd,150,100,120\n");
  const auto f = compare_zeus_trace(TwinParams::from(catalog()), catalog(), setup(), path);
  EXPECT_EQ(f.twin_gpu, "v100-pcie");
  ASSERT_EQ(f.points.size(), 2u);
  EXPECT_EQ(f.skipped_rows, 1u);
  EXPECT_EQ(f.skipped_workloads, std::vector<std::string>{"cifar10/vgg11"});
  EXPECT_LE(f.points[1].twin.average_power_w, 100.0 + 1e-9);
  EXPECT_NEAR(f.time.mape,
              50.0 * (std::abs(f.points[0].twin.epoch_s - 3515.0) / 3515.0 + std::abs(f.points[1].twin.epoch_s - 6781.0) / 6781.0),
              1e-9);
  const auto text = zeus_trace_text(f);
  const auto last = text.substr(text.rfind('\n', text.size() - 2) + 1);
  EXPECT_TRUE(std::regex_match(last, std::regex(R"(zeus power-limit curves: time MAPE [0-9.]+% power MAPE [0-9.]+% \(2 configs\)\n)")))
      << last;
  EXPECT_NE(text.find("SIMULATED"), std::string::npos);
}

TEST(ZeusSource, TheReportComparesEachTracesHostBoundStepsWithTheReferenceTestbeds) {
  // Two workloads each: the smallest batch both traces ran is compared, at the highest limit.
  const auto point = [](const std::string& network, int batch, double limit_w, double real_s, double twin_s) {
    ZeusTracePoint p;
    p.row = {"data", network, "adam", batch, limit_w, real_s, 100.0, 0};
    p.twin.epoch_s = twin_s;
    p.twin.average_power_w = 90.0;
    return p;
  };
  const auto trace = [](const std::string& gpu, const std::string& split) {
    ZeusTraceFidelity f;
    f.trace_gpu = f.twin_gpu = gpu;
    f.split = split;
    return f;
  };
  auto reference = trace("v100", "in-sample");
  reference.points = {point("ncf", 4, 250, 100.0, 110.0), point("ncf", 8, 250, 50.0, 55.0),
                      point("cnn", 8, 200, 10.0, 10.0), point("cnn", 8, 250, 20.0, 20.0)};
  auto fitted = trace("rtx6000", "in-sample");
  fitted.points = {point("ncf", 8, 250, 120.0, 88.0), point("ncf", 4, 250, 236.0, 187.0),
                   point("cnn", 8, 250, 32.0, 40.0), point("cnn", 8, 200, 30.0, 30.0)};
  auto held_out = trace("p100", "held out");
  held_out.points = {point("ncf", 4, 250, 178.0, 102.0)};
  held_out.points[0].row.average_power_w = 180.0;
  held_out.points[0].twin.average_power_w = 237.0;
  const auto text = zeus_markdown({reference, fitted, held_out});
  EXPECT_NE(text.find("on the rtx6000 (fitted).** One host speed"), std::string::npos) << text;
  EXPECT_NE(text.find("against the v100: data/ncf 2.36× (twin 1.70×) at batch 4; data/cnn 1.60× (twin 2.00×) at batch 8."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the p100 never averaged more than 180 W at any limit, the twin (nothing fitted to this trace) "
                      "up to 237 W"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("against the v100: data/ncf 1.78× (twin 0.93×) at batch 4."), std::string::npos) << text;
  EXPECT_EQ(text.find("on the v100 ("), std::string::npos) << "the reference is not compared with itself";
}

TEST(ZeusSource, MalformedTracesAndSetupsAreNamed) {
  test::TempDir dir;
  const auto bad_number = dir.write("summary_power_v100.csv", std::string(kHeader) + "imagenet,resnet50,256,adadelta,250,x,220\n");
  try {
    (void)bench::load_zeus_power_rows(bad_number);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  }
  const auto no_column = dir.write("a.csv", "dataset,network,batch_size\nimagenet,resnet50,8\n");
  EXPECT_THROW((void)bench::load_zeus_power_rows(no_column), Error);
  const auto header_only = dir.write("b.csv", kHeader);
  EXPECT_THROW((void)bench::load_zeus_power_rows(header_only), Error);
  const auto unmapped = dir.write("summary_power_v100.csv", std::string(kHeader) + "cifar10,vgg11,64,sgd,150,100,120\n");
  EXPECT_THROW((void)compare_zeus_trace(TwinParams::from(catalog()), catalog(), setup(), unmapped), Error);
  const auto bad_setup = dir.write("zeus.json", R"({"fit": ["v100"], "workloads": [{"dataset": "d", "network": "n",
      "model": "no_such_model", "twin_dataset": "imagenet_train", "precision": "fp32"}]})");
  EXPECT_THROW((void)load_zeus_setup(bad_setup, catalog()), Error);
  const auto derive = [&](const std::string& list) {
    return dir.write("derive.json", R"({"fit": ["v100"], "derive": )" + list +
                                        R"(, "workloads": [{"dataset": "imagenet", "network": "resnet50",
      "model": "resnet50", "twin_dataset": "imagenet_train", "precision": "fp32"}]})");
  };
  EXPECT_EQ(load_zeus_setup(derive(R"(["p100", "a40"])"), catalog()).derived_gpus, (std::vector<std::string>{"p100", "a40"}));
  EXPECT_THROW((void)load_zeus_setup(derive(R"(["k80"])"), catalog()), Error);
  try {
    (void)load_zeus_setup(derive(R"(["p100", "p100"])"), catalog());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_NE(std::string(e.what()).find("names the GPU 'p100' twice"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpucap::calibrate
