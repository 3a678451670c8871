// The serve matrix (bench/serve_bench.hpp): its file, the capacity and the oracle's exhaustive
// search on small cells, figures that come from the simulation, and the issue's checks reacting to
// the numbers. The matrix's own results are a benchmark (docs/results/serve/), not a test.

#include "gpucap/bench/serve_bench.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "gpucap/control/capserve.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/serve/arrivals.hpp"
#include "gpucap/sim/noise.hpp"
#include "support/paths.hpp"

namespace gpucap::bench {
namespace {

const sim::Catalog& catalog() {
  static const auto c = sim::Catalog::load(test::data_dir());
  return c;
}

std::string matrix_file(const std::string& name) { return test::data_dir() + "/matrices/" + name + ".json"; }

// One GPU, one model, two caps, one load; short segments and a small oracle space.
ServeMatrix small_matrix() {
  ServeMatrix m;
  m.id = "serve-test";
  m.slo_s = 0.1;
  m.segment_s = 12.0;
  m.drain_s = 5.0;
  m.loads = {0.7};
  m.model_max_batch_size = 256;
  m.static_max_batch_size = 32;
  m.static_max_queue_delay_s = 0.002;
  m.algorithms = {"capserve", "static"};
  m.oracle.batch_sizes = {8, 32, 128};
  m.oracle.delays_s = {0.0, 0.005};
  m.oracle.gpu_clock = true;
  ServeGpuSpec gpu;
  gpu.gpu = "a100";
  gpu.caps_w = {250.0, 180.0};
  gpu.models = {ServeModelSpec{"vgg19", sim::Precision::fp16, ""}};
  m.gpus = {gpu};
  return m;
}

const ServeBenchReport& small_report() {
  static const auto report = [] {
    ServeBenchOptions options;
    options.threads = 2;
    return run_serve_bench(small_matrix(), catalog(), options);
  }();
  return report;
}

ServeTwin vgg19_twin() {
  const auto& model = catalog().model("vgg19");
  return ServeTwin{&catalog().gpu("a100"), &model, model.precision, 100.0, 0.1, 5.0, 256};
}

TEST(ServeMatrixFile, TheMatrixOfTheIssueLoadsAndValidates) {
  const auto path = matrix_file("serve");
  ASSERT_TRUE(is_serve_matrix(path));
  EXPECT_FALSE(is_serve_matrix(matrix_file("pctodl-a100")));
  const auto m = load_serve_matrix(path);
  EXPECT_NO_THROW(validate_serve_matrix(m, catalog()));
  EXPECT_DOUBLE_EQ(m.slo_s, 0.1);
  EXPECT_EQ(m.loads, (std::vector<double>{0.3, 0.7, 1.0, 1.5, 2.0}));
  ASSERT_EQ(m.gpus.size(), 2U);
  EXPECT_EQ(m.gpus[0].gpu, "a100");
  EXPECT_EQ(m.gpus[0].caps_w, (std::vector<double>{250.0, 180.0, 220.0}));
  EXPECT_EQ(m.gpus[0].models.size(), 3U);
  EXPECT_EQ(m.gpus[1].models.size(), 3U);
  const auto schedule = m.gpus[0].schedule(m.segment_s);
  EXPECT_EQ(schedule.to_string(), "0:250,60:180,120:220");
  const auto quick = load_serve_matrix(matrix_file("serve-quick"));
  EXPECT_NO_THROW(validate_serve_matrix(quick, catalog()));
}

TEST(ServeMatrixFile, BadEntriesAreNamed) {
  test::TempDir dir;
  auto text = [](const std::string& model, const std::string& precision, const std::string& caps) {
    return R"({"id": "x", "kind": "serve", "slo_ms": 100, "segment_s": 10, "loads": [0.5],
      "model_max_batch_size": 256, "static": {"max_batch_size": 32, "max_queue_delay_ms": 2},
      "algorithms": ["capserve"], "oracle": {"batch_sizes": [8], "delays_ms": [0]},
      "gpus": [{"gpu": "a100", "caps_w": [)" +
           caps + R"(], "models": [{"model": ")" + model + R"(", "precision": ")" + precision + R"("}]}]})";
  };
  const auto good = load_serve_matrix(dir.write("good.json", text("vgg19", "fp16", "250, 180")));
  EXPECT_NO_THROW(validate_serve_matrix(good, catalog()));
  // The twin's profile of VGG-19 is taken in fp16: another precision is refused.
  const auto fp32 = load_serve_matrix(dir.write("fp32.json", text("vgg19", "fp32", "250")));
  EXPECT_THROW(validate_serve_matrix(fp32, catalog()), Error);
  const auto high = load_serve_matrix(dir.write("high.json", text("vgg19", "fp16", "250, 900")));
  EXPECT_THROW(validate_serve_matrix(high, catalog()), Error);
  try {
    (void)load_serve_matrix(dir.write("bad.json", text("vgg19", "fp8", "250")));
    FAIL() << "fp8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("precision"), std::string::npos) << e.what();
  }
}

TEST(ServeOracle, TheSpaceHoldsEveryClockAndEveryMemoryClockOfAGpuWithSeveral) {
  ServeOracleSpace space;
  space.batch_sizes = {32, 8};
  space.delays_s = {0.0};
  const auto& ti = catalog().gpu("rtx3080ti");
  ASSERT_GT(ti.memory_clocks_mhz.size(), 1U);
  const auto settings = oracle_settings(space, ti);
  EXPECT_EQ(settings.size(), 2 * (ti.dvfs_levels_mhz.size() + 1) * ti.memory_clocks_mhz.size());
  // The fastest first (the GPU's own clock, the highest memory clock, the largest batch), the
  // slowest last.
  EXPECT_FALSE(settings.front().sm_clock_mhz);
  EXPECT_EQ(settings.front().memory_clock_mhz, ti.memory_clocks_mhz.back());
  EXPECT_EQ(settings.front().batch_cap, 32);
  EXPECT_EQ(settings.back().sm_clock_mhz, ti.dvfs_levels_mhz.front());
  EXPECT_EQ(settings.back().memory_clock_mhz, ti.memory_clocks_mhz.front());
  EXPECT_NE(settings.back().describe().find(fmt::format("mem={:g}MHz", ti.memory_clocks_mhz.front())), std::string::npos);
  space.memory_clocks = false;
  const auto default_memory = oracle_settings(space, ti);
  EXPECT_EQ(default_memory.size(), 2 * (ti.dvfs_levels_mhz.size() + 1));
  for (const auto& s : default_memory) EXPECT_FALSE(s.memory_clock_mhz);
  space.gpu_clock = false;
  EXPECT_EQ(oracle_settings(space, ti).size(), 2 * ti.dvfs_levels_mhz.size());
}

// The oracle's search on a subset of the space against every setting of it run alone (nothing to
// stop it early but its own failure): the best by requests within the SLO, then by energy, must be
// the search's choice.
void expect_exact_search(const std::string& gpu_id, double cap_w, double rate_rps) {
  const auto& model = catalog().model("vgg19");
  const ServeTwin twin{&catalog().gpu(gpu_id), &model, model.precision, 100.0, 0.1, 5.0, 256};
  ServeOracleSpace space;
  space.batch_sizes = {4, 32};
  space.delays_s = {0.0, 0.01};
  const auto settings = oracle_settings(space, *twin.gpu);
  // Every third clock of the ladder (and every memory clock) keeps the test short; the GPU's own
  // clock stays in.
  std::vector<StaticSetting> some;
  std::optional<double> last_clock = -1.0;
  int clock_index = -1;
  for (const auto& s : settings) {
    if (s.sm_clock_mhz != last_clock) {
      last_clock = s.sm_clock_mhz;
      ++clock_index;
    }
    if (!s.sm_clock_mhz || clock_index % 3 == 0) some.push_back(s);
  }
  OracleSearch search;
  search.cap_w = cap_w;
  search.duration_s = 8.0;
  search.arrivals_s = serve::all_arrivals(serve::ArrivalProcess::from_schedule(
      serve::RateSchedule::constant(rate_rps), serve::ArrivalSpacing::poisson, 3, search.duration_s, 1'000'000));
  search.twin_seed = 5;
  const auto best = search_oracle_segment(twin, some, search);
  ASSERT_TRUE(best.setting) << "no setting serves " << rate_rps << " requests/s under " << cap_w << " W";
  EXPECT_FALSE(best.sheds);
  EXPECT_EQ(best.settings, static_cast<int>(some.size()));
  EXPECT_GT(best.stopped_early, 0);
  EXPECT_GE(best.figures.slo_attainment, 0.99);
  EXPECT_EQ(best.figures.windows_over_cap, 0);
  std::optional<ServeOracleSegment> reference;
  for (const auto& s : some) {
    const auto alone = search_oracle_segment(twin, {s}, search);
    if (!alone.setting) continue;
    if (!reference || alone.figures.good > reference->figures.good ||
        (alone.figures.good == reference->figures.good && alone.figures.energy_j < reference->figures.energy_j)) {
      reference = alone;
    }
  }
  ASSERT_TRUE(reference);
  EXPECT_EQ(best.setting->describe(), reference->setting->describe());
  EXPECT_EQ(best.figures.good, reference->figures.good);
  EXPECT_DOUBLE_EQ(best.figures.energy_j, reference->figures.energy_j);
}

TEST(ServeOracle, TheSearchIsExactTheEarlyStopsNeverChangeTheChoice) {
  expect_exact_search("a100", 180.0, 700.0);
  expect_exact_search("rtx3080ti", 160.0, 300.0);  // memory clocks too
}

TEST(ServeOracle, OverloadedTheOracleShedsDownToTheCapacity) {
  const auto twin = vgg19_twin();
  ServeOracleSpace space;
  space.batch_sizes = {32};
  space.delays_s = {0.0};
  space.gpu_clock = true;
  const auto settings = oracle_settings(space, *twin.gpu);
  CapacitySearch capacity_search;
  capacity_search.cap_w = 180.0;
  capacity_search.duration_s = 8.0;
  const auto capacity = find_capacity(twin, settings, capacity_search);
  ASSERT_GT(capacity.capacity_rps, 100.0);
  EXPECT_EQ(capacity.settings, static_cast<int>(settings.size()));
  OracleSearch search;
  search.cap_w = 180.0;
  search.duration_s = 8.0;
  search.arrivals_s = serve::all_arrivals(serve::ArrivalProcess::from_schedule(
      serve::RateSchedule::constant(2.0 * capacity.capacity_rps), serve::ArrivalSpacing::poisson, 4, 8.0, 1'000'000));
  search.capacity = &capacity;
  const auto overloaded = search_oracle_segment(twin, settings, search);
  ASSERT_TRUE(overloaded.setting);
  EXPECT_TRUE(overloaded.sheds);
  EXPECT_LE(overloaded.setting->admit_rate_rps, capacity.capacity_rps);
  EXPECT_GT(overloaded.figures.shed, 0U);
  EXPECT_GE(overloaded.figures.slo_attainment, 0.99);
  EXPECT_GE(overloaded.figures.goodput_rps, 0.9 * capacity.capacity_rps);
  // Without a capacity to fall back on, nothing meets the SLO at twice the capacity.
  search.capacity = nullptr;
  EXPECT_FALSE(search_oracle_segment(twin, settings, search).setting);
}

TEST(ServeBench, CapacitiesBindAndTheOracleMeetsTheSloInEverySegment) {
  const auto& report = small_report();
  ASSERT_EQ(report.results.size(), 1U);
  const auto& r = report.results[0];
  ASSERT_EQ(r.capacities.size(), 2U);
  ASSERT_TRUE(r.uncapped);
  EXPECT_GT(r.capacity_at(180.0)->capacity_rps, 100.0);
  EXPECT_LT(r.capacity_at(180.0)->capacity_rps, r.capacity_at(250.0)->capacity_rps);  // the caps bind
  EXPECT_LE(r.capacity_at(250.0)->capacity_rps, r.uncapped->capacity_rps);
  EXPECT_EQ(report.oracle_settings, 3 * 2 * static_cast<int>(catalog().gpu("a100").dvfs_levels_mhz.size() + 1));
  ASSERT_EQ(r.cells.size(), 1U);
  const auto& cell = r.cells[0];
  EXPECT_DOUBLE_EQ(cell.rate_rps, 0.7 * r.capacity_at(180.0)->capacity_rps);
  ASSERT_EQ(cell.oracle.size(), 2U);
  for (const auto& o : cell.oracle) {
    ASSERT_TRUE(o.setting);
    EXPECT_FALSE(o.sheds);  // 70 % of the lowest cap's capacity: some static setting carries it all
    EXPECT_GE(o.figures.slo_attainment, 0.99);
    EXPECT_EQ(o.figures.windows_over_cap, 0);
    EXPECT_GT(o.figures.goodput_rps, 0.9 * cell.rate_rps);
  }
}

TEST(ServeBench, CapservesFiguresAreTheSimulationsAndTheOutputShowsThem) {
  const auto& report = small_report();
  const auto& r = report.results[0];
  const auto& cell = r.cells[0];
  const auto* capserve = cell.run("capserve");
  ASSERT_NE(capserve, nullptr);
  // The same run, outside the bench: the cell's seeds, the profile the bench measures.
  const auto seeds = serve_cell_seeds(report.seed, "a100", "vgg19", 0.7);
  const auto& gpu = catalog().gpu("a100");
  const auto& model = catalog().model("vgg19");
  runtime::SimOptions options;
  options.seed = seeds.twin;
  runtime::SimPlatform platform(gpu, model, model.precision, options);
  control::CapserveParams params;
  params.profile = runtime::measure_default_profile(catalog(), "a100", "vgg19", 100.0,
                                                    sim::derive_seed(report.seed, runtime::kProfileSeedStream));
  params.slo_s = 0.1;
  params.max_batch_size = 256;
  params.limits = platform.controller_limits();
  control::CapserveController controller(params);
  serve::SimulationConfig config;
  config.duration_s = 24.0;
  config.drain_s = 5.0;
  config.cap = r.schedule;
  config.slo_s = 0.1;
  config.batcher.max_batch_size = 256;
  const auto direct = serve_run_figures(
      "capserve", serve::simulate_serving(platform, controller,
                                          serve::ArrivalProcess::from_schedule(serve::RateSchedule::constant(cell.rate_rps),
                                                                               serve::ArrivalSpacing::poisson, seeds.arrivals,
                                                                               24.0, 100'000'000),
                                          config));
  ASSERT_EQ(direct.segments.size(), capserve->segments.size());
  for (std::size_t k = 0; k < direct.segments.size(); ++k) {
    EXPECT_EQ(direct.segments[k].arrivals, capserve->segments[k].arrivals);
    EXPECT_EQ(direct.segments[k].good, capserve->segments[k].good);
    EXPECT_DOUBLE_EQ(direct.segments[k].goodput_rps, capserve->segments[k].goodput_rps);
    EXPECT_DOUBLE_EQ(direct.segments[k].max_power_w, capserve->segments[k].max_power_w);
    EXPECT_EQ(direct.segments[k].windows_over_cap, capserve->segments[k].windows_over_cap);
  }
  // The figures are consistent with themselves.
  const auto& s0 = capserve->segments[0];
  EXPECT_DOUBLE_EQ(s0.goodput_rps, static_cast<double>(s0.good) / (s0.end_s - s0.start_s));
  EXPECT_LE(s0.good, s0.answered);
  EXPECT_EQ(capserve->total.arrivals, capserve->segments[0].arrivals + capserve->segments[1].arrivals);
  // The CSV and the report carry them.
  const auto csv = serve_summary_csv(report);
  EXPECT_NE(csv.find(fmt::format("a100,vgg19,fp16,0.7,{:.3f},capserve,1,250,", cell.rate_rps)), std::string::npos) << csv;
  EXPECT_NE(csv.find(fmt::format(",{:.3f},", s0.goodput_rps)), std::string::npos);
  const auto md = serve_report_markdown(report, "gpucap bench --matrix serve-test", false);
  EXPECT_NE(md.find(fmt::format("| capserve | {:.1f} (", s0.goodput_rps)), std::string::npos) << md;
  EXPECT_NE(md.find("simulated"), std::string::npos);
  const auto json = serve_summary_json(report);
  EXPECT_TRUE(json.at("simulated").get<bool>());
  EXPECT_DOUBLE_EQ(json.at("results")[0].at("cells")[0].at("runs")[0].at("segments")[0].at("goodput_rps").get<double>(),
                   s0.goodput_rps);
}

TEST(ServeBench, TheSameSeedGivesTheSameFiguresWhateverTheThreads) {
  ServeBenchOptions options;
  options.threads = 1;
  auto m = small_matrix();
  m.gpus[0].caps_w = {180.0};
  m.segment_s = 6.0;
  m.oracle.batch_sizes = {32};
  const auto one = run_serve_bench(m, catalog(), options);
  options.threads = 2;
  const auto two = run_serve_bench(m, catalog(), options);
  EXPECT_EQ(serve_summary_csv(one), serve_summary_csv(two));
  options.seed = 2;
  EXPECT_NE(serve_summary_csv(one), serve_summary_csv(run_serve_bench(m, catalog(), options)));
}

// ---- The checks, on figures made by hand --------------------------------------------------------

ServeFigures figures(double cap_w, double start_s, std::uint64_t arrivals, std::uint64_t good, double attainment) {
  ServeFigures f;
  f.cap_w = cap_w;
  f.start_s = start_s;
  f.end_s = start_s + 10.0;
  f.arrivals = arrivals;
  f.answered = good;
  f.good = good;
  f.goodput_rps = static_cast<double>(good) / 10.0;
  f.slo_attainment = attainment;
  f.windows = 10;
  f.max_queued_requests = 3;
  return f;
}

ServeRun run_of(const std::string& name, std::vector<ServeFigures> segments) {
  ServeRun run;
  run.algorithm = name;
  run.segments = std::move(segments);
  for (const auto& s : run.segments) {
    run.total.arrivals += s.arrivals;
    run.total.good += s.good;
    run.total.windows += s.windows;
    run.total.windows_over_cap += s.windows_over_cap;
  }
  return run;
}

// Two segments (200, 150 W), capacities 1000 and 800 requests/s; loads 70 % and 200 %. capserve
// meets everything; static serves as much at 70 % but goes over the cap, and collapses at 200 %.
ServeBenchReport synthetic() {
  ServeBenchReport report;
  report.matrix.slo_s = 0.1;
  report.algorithms = {"capserve", "static"};
  ServeModelResult r;
  r.gpu = "gpu";
  r.model = "model";
  r.schedule = CapSchedule::parse("0:200,10:150");
  r.capacities = {ServeCapacity{200.0, 1000.0, {}, 1, 1}, ServeCapacity{150.0, 800.0, {}, 1, 1}};
  ServeCell low;
  low.load = 0.7;
  low.rate_rps = 560.0;
  low.runs = {run_of("capserve", {figures(200, 0, 5600, 5600, 1.0), figures(150, 10, 5600, 5600, 1.0)}),
              run_of("static", {figures(200, 0, 5600, 5600, 1.0), figures(150, 10, 5600, 5600, 1.0)})};
  low.runs[1].segments[1].windows_over_cap = 4;
  low.runs[1].segments[1].windows_over_cap_outside_transitions = 3;
  for (int k = 0; k < 2; ++k) {
    ServeOracleSegment o;
    o.setting = StaticSetting{};
    o.figures = figures(k == 0 ? 200 : 150, 10.0 * k, 5600, 5600, 1.0);
    low.oracle.push_back(o);
  }
  ServeCell high = low;
  high.load = 2.0;
  high.rate_rps = 1600.0;
  high.runs = {run_of("capserve", {figures(200, 0, 16000, 9500, 0.999), figures(150, 10, 16000, 7600, 0.999)}),
               run_of("static", {figures(200, 0, 16000, 300, 0.02), figures(150, 10, 16000, 0, 0.0)})};
  high.runs[0].segments[0].shed = 6500;
  high.runs[0].segments[1].shed = 8400;
  high.oracle[0].figures = figures(200, 0, 16000, 9800, 1.0);
  high.oracle[1].figures = figures(150, 10, 16000, 7900, 1.0);
  r.cells = {low, high};
  report.results = {r};
  return report;
}

std::vector<bool> results(const ServeBenchReport& report) {
  std::vector<bool> out;
  for (const auto& c : serve_checks(report)) {
    EXPECT_TRUE(c.run) << c.check << ": " << c.measured;
    out.push_back(c.pass);
  }
  return out;
}

// The checks in serve_checks' order.
enum Check { kAttainment, kOverCap, kOfOracle, kAboveStatic, kNotBelowStatic, kOfCapacity, kQueue, kChecks };

TEST(ServeChecks, EveryCheckPassesOnFiguresThatMeetIt) {
  const auto report = synthetic();
  const auto checks = serve_checks(report);
  ASSERT_EQ(checks.size(), static_cast<std::size_t>(kChecks));
  for (const auto& c : checks) EXPECT_TRUE(c.pass) << c.check << ": " << c.measured;
  // capserve answered every request in time where static went over the cap: equal counts.
  EXPECT_NE(checks[kAboveStatic].measured.find("equal"), std::string::npos) << checks[kAboveStatic].measured;
  const auto md = serve_report_markdown(report, "test", false);
  EXPECT_NE(md.find("7 PASS, 0 MISS"), std::string::npos) << md;
  EXPECT_EQ(md.find("**MISS**"), std::string::npos);
}

TEST(ServeChecks, EachCheckMissesWhenItsNumberMisses) {
  const auto expect_only = [](const ServeBenchReport& report, Check which) {
    const auto r = results(report);
    ASSERT_EQ(r.size(), static_cast<std::size_t>(kChecks));
    for (std::size_t i = 0; i < r.size(); ++i) {
      EXPECT_EQ(r[i], static_cast<int>(i) != which) << "check " << i << " (expected only " << which << " to miss)";
    }
    const auto md = serve_report_markdown(report, "test", false);
    EXPECT_NE(md.find("**MISS**"), std::string::npos);
  };
  {
    auto report = synthetic();
    report.results[0].cells[0].runs[0].segments[1].slo_attainment = 0.985;
    expect_only(report, kAttainment);
  }
  {
    auto report = synthetic();
    report.results[0].cells[0].runs[0].total.windows_over_cap = 1;  // 1 of 20 windows: 5 %
    expect_only(report, kOverCap);
  }
  {
    auto report = synthetic();
    auto& oracle = report.results[0].cells[0].oracle[1].figures;
    oracle.goodput_rps = 560.0 / 0.94;  // capserve at 94 % of it
    expect_only(report, kOfOracle);
  }
  {
    // Static misses the SLO at 70 % and capserve, not answering everything, is not above it.
    auto report = synthetic();
    auto& cell = report.results[0].cells[0];
    cell.runs[1].segments[0].slo_attainment = 0.98;
    cell.runs[0].segments[0].good = 5590;  // 10 requests late: capserve did not answer all in time
    cell.runs[0].segments[0].goodput_rps = 559.0;
    cell.runs[1].segments[0].good = 5590;
    cell.runs[1].segments[0].goodput_rps = 559.0;
    expect_only(report, kAboveStatic);
    // The miss names what the best setting under the cap answered there.
    EXPECT_NE(serve_checks(report)[kAboveStatic].measured.find("70 % load 200 W (559.0 vs 559.0 req/s; oracle under the cap 560.0)"),
              std::string::npos)
        << serve_checks(report)[kAboveStatic].measured;
  }
  {
    // Static ran over the cap and answered more than any setting under it: the miss says so.
    auto report = synthetic();
    auto& cell = report.results[0].cells[0];
    cell.runs[0].segments[1].good = 5500;
    cell.runs[0].segments[1].goodput_rps = 550.0;
    cell.oracle[1].figures.goodput_rps = 545.0;
    const auto checks = serve_checks(report);
    EXPECT_FALSE(checks[kAboveStatic].pass);
    EXPECT_NE(checks[kAboveStatic].measured.find(
                  "70 % load 150 W (550.0 vs 560.0 req/s; oracle under the cap 545.0: static's lead is over the cap)"),
              std::string::npos)
        << checks[kAboveStatic].measured;
  }
  {
    auto report = synthetic();
    auto& s = report.results[0].cells[0].runs[1].segments[0];  // static meets everything in segment 1
    s.goodput_rps = 560.0 / 0.975;                             // and serves 2.5 % more than capserve
    s.good = 5743;
    s.arrivals = 5743;
    expect_only(report, kNotBelowStatic);
  }
  {
    auto report = synthetic();
    auto& s = report.results[0].cells[1].runs[0].segments[1];
    s.goodput_rps = 0.85 * 800.0;
    s.good = 6800;
    expect_only(report, kOfCapacity);
  }
  {
    auto report = synthetic();
    report.results[0].cells[1].runs[0].segments[0].max_queued_requests = 101;  // bound: 1000/s × 0.1 s
    expect_only(report, kQueue);
  }
}

TEST(ServeChecks, AMissingCellIsNotJudged) {
  auto report = synthetic();
  report.results[0].cells.pop_back();  // no 200 % cell
  const auto checks = serve_checks(report);
  EXPECT_FALSE(checks[kOfCapacity].run);
  EXPECT_FALSE(checks[kQueue].run);
  EXPECT_TRUE(checks[kAttainment].run);
  EXPECT_NE(serve_report_markdown(report, "test", false).find("not judged"), std::string::npos);
}

TEST(ServeBenchOutput, WritesThePlots) {
  if (std::system("gnuplot --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  test::TempDir dir;
  const auto& report = small_report();
  write_serve_plots(report, dir.path());
  EXPECT_TRUE(std::filesystem::exists(dir.file(serve_goodput_plot("a100"))));
  EXPECT_TRUE(std::filesystem::exists(dir.file(serve_p99_plot("a100"))));
  EXPECT_TRUE(std::filesystem::exists(dir.file(serve_power_plot("a100", "vgg19", 0.7))));
  EXPECT_NE(serve_report_markdown(report, "x", true).find("plots/" + serve_power_plot("a100", "vgg19", 0.7)),
            std::string::npos);
}

}  // namespace
}  // namespace gpucap::bench
