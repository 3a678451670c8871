// The serve matrix: its file and its runs on the twin (the checks: serve_checks.cpp).

#include "gpucap/bench/serve_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "gpucap/control/capserve.hpp"
#include "gpucap/control/registry.hpp"
#include "gpucap/control/serving.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/core/parallel.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/serve/arrivals.hpp"
#include "gpucap/sim/noise.hpp"

namespace gpucap::bench {

namespace {

constexpr std::uint64_t kMaxArrivals = 100'000'000;
constexpr const char* kCapserve = "capserve";
constexpr const char* kStatic = "static";

// ---- Seeds: from names, so a cell's figures do not depend on what else the matrix holds -------

std::uint64_t name_hash(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::uint64_t seed_for(std::uint64_t seed, const std::string& key) { return sim::derive_seed(seed, name_hash(key)); }

std::string cell_key(const std::string& gpu, const std::string& model, double load) {
  return fmt::format("{}/{}/{:.4f}", gpu, model, load);
}

// ---- The matrix file ----------------------------------------------------------------------------

bool is_seed_algorithm(const std::string& name) {
  return !control::needs_mps_planning(name) && !control::needs_offline_search(name) &&
         std::any_of(control::algorithms().begin(), control::algorithms().end(),
                     [&name](const control::AlgorithmInfo& info) { return info.name == name; });
}

void check_algorithm(const std::string& name) {
  if (name == kCapserve || name == kStatic || is_seed_algorithm(name)) return;
  throw usage_error(fmt::format("serve matrix: unknown algorithm '{}' (capserve, static, or a single-tenant "
                                "controller of 'gpucap list algorithms' without an offline search)",
                                name));
}

// ---- Running --------------------------------------------------------------------------------------

struct ModelInputs {
  ServeTwin twin;
  std::shared_ptr<const predict::ProfileModel> profile;  // capserve's and capfit's
};

// p99_window_s: the span of the p99 the serving loop shows the controller.
std::unique_ptr<control::ServingController> serving_controller(const std::string& algorithm, const ServeMatrix& matrix,
                                                               const ModelInputs& inputs,
                                                               const control::PlatformLimits& limits, double p99_window_s) {
  const control::BatcherDefaults batcher{matrix.static_max_batch_size, matrix.static_max_queue_delay_s};
  if (algorithm == kCapserve) {
    control::CapserveParams params;
    params.profile = inputs.profile;
    params.slo_s = matrix.slo_s;
    params.max_batch_size = matrix.model_max_batch_size;
    params.limits = limits;
    params.p99_memory_s = p99_window_s;
    return std::make_unique<control::CapserveController>(params);
  }
  if (algorithm == kStatic) return std::make_unique<control::StaticServing>(batcher, limits);
  control::ControllerOptions options;
  if (control::needs_profile(algorithm)) options.profile = inputs.profile;
  return std::make_unique<control::SeedServing>(control::make_controller(algorithm, options, limits), batcher);
}

ServeRun run_algorithm(const std::string& algorithm, const ServeMatrix& matrix, const ModelInputs& inputs,
                       const CapSchedule& schedule, double rate_rps, std::uint64_t arrival_seed,
                       std::uint64_t twin_seed) {
  runtime::SimOptions options;
  options.seed = twin_seed;
  options.sample_hz = inputs.twin.sample_hz;
  runtime::SimPlatform platform(*inputs.twin.gpu, *inputs.twin.model, inputs.twin.precision, options);
  serve::SimulationConfig config;
  const auto controller = serving_controller(algorithm, matrix, inputs, platform.controller_limits(), config.stats.window_s);
  config.duration_s = matrix.segment_s * static_cast<double>(schedule.steps().size());
  config.drain_s = matrix.drain_s;
  config.cap = schedule;
  config.slo_s = matrix.slo_s;
  config.batcher.max_batch_size = matrix.model_max_batch_size;
  auto arrivals = serve::ArrivalProcess::from_schedule(serve::RateSchedule::constant(rate_rps),
                                                       serve::ArrivalSpacing::poisson, arrival_seed, config.duration_s,
                                                       kMaxArrivals);
  return serve_run_figures(algorithm, serve::simulate_serving(platform, *controller, std::move(arrivals), config));
}

// The cell's arrivals in segment k, from the segment's start.
std::vector<double> segment_arrivals(double rate_rps, std::uint64_t arrival_seed, double segment_s, std::size_t segments,
                                     std::size_t k) {
  const double duration_s = segment_s * static_cast<double>(segments);
  const auto all = serve::all_arrivals(serve::ArrivalProcess::from_schedule(
      serve::RateSchedule::constant(rate_rps), serve::ArrivalSpacing::poisson, arrival_seed, duration_s, kMaxArrivals));
  const double start = segment_s * static_cast<double>(k);
  std::vector<double> out;
  for (const double t : all) {
    if (t >= start && t < start + segment_s) out.push_back(t - start);
  }
  return out;
}

}  // namespace

ServeCellSeeds serve_cell_seeds(std::uint64_t seed, const std::string& gpu, const std::string& model, double load) {
  const auto key = cell_key(gpu, model, load);
  return ServeCellSeeds{seed_for(seed, key + "/arrivals"), seed_for(seed, key + "/twin")};
}

CapSchedule ServeGpuSpec::schedule(double segment_s) const {
  std::vector<CapStep> steps;
  for (std::size_t i = 0; i < caps_w.size(); ++i) steps.push_back(CapStep{segment_s * static_cast<double>(i), caps_w[i]});
  return CapSchedule::from_steps(std::move(steps));
}

bool is_serve_matrix(const std::string& path) {
  const auto json = load_json_file(path);
  return json.is_object() && json.contains("kind") && json["kind"] == "serve";
}

ServeMatrix load_serve_matrix(const std::string& path) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  if (f.string("kind") != "serve") throw f.error("kind", "must be \"serve\" for a serving matrix");
  ServeMatrix m;
  m.id = f.string("id");
  m.description = f.string_or("description", "");
  m.slo_s = f.positive("slo_ms") / 1e3;
  m.segment_s = f.positive("segment_s");
  m.drain_s = f.non_negative_or("drain_s", m.drain_s);
  m.loads = f.numbers("loads");
  if (m.loads.empty()) throw f.error("loads", "must list at least one load");
  for (const double load : m.loads) {
    if (!(load > 0.0 && load <= 10.0)) throw f.error("loads", "each load is a fraction of the capacity in (0, 10]");
  }
  for (std::size_t i = 1; i < m.loads.size(); ++i) {
    if (!(m.loads[i] > m.loads[i - 1])) throw f.error("loads", "must increase strictly");
  }
  m.model_max_batch_size = static_cast<int>(f.positive_integer("model_max_batch_size"));
  {
    const auto s = f.object("static");
    m.static_max_batch_size = static_cast<int>(s.positive_integer("max_batch_size"));
    m.static_max_queue_delay_s = s.non_negative("max_queue_delay_ms") / 1e3;
    m.static_note = s.string_or("note", "");
  }
  m.algorithms = f.strings_or_empty("algorithms");
  if (m.algorithms.empty()) throw f.error("algorithms", "must list at least one algorithm");
  {
    const auto o = f.object("oracle");
    m.oracle.batch_sizes.clear();
    for (const double b : o.numbers("batch_sizes")) {
      if (!(b >= 1.0 && b == std::floor(b))) throw o.error("batch_sizes", "each is a whole number >= 1");
      m.oracle.batch_sizes.push_back(static_cast<int>(b));
    }
    m.oracle.delays_s.clear();
    for (const double d : o.numbers("delays_ms")) {
      if (!(d >= 0.0 && std::isfinite(d))) throw o.error("delays_ms", "each is >= 0");
      m.oracle.delays_s.push_back(d / 1e3);
    }
    if (m.oracle.batch_sizes.empty() || m.oracle.delays_s.empty()) {
      throw o.error("batch_sizes", "the oracle needs at least one batch size and one delay");
    }
    const auto flag = [&o](const char* key) {
      if (!o.has(key)) return true;
      if (!o.at(key).is_boolean()) throw o.error(key, "must be true or false");
      return o.at(key).get<bool>();
    };
    m.oracle.gpu_clock = flag("gpu_clock");
    m.oracle.memory_clocks = flag("memory_clocks");
  }
  const auto& gpus = f.at("gpus");
  if (!gpus.is_array() || gpus.empty()) throw f.error("gpus", "must be a non-empty array");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const JsonFields g(gpus[i], path, fmt::format("gpus[{}].", i));
    ServeGpuSpec gpu;
    gpu.gpu = g.string("gpu");
    gpu.caps_w = g.numbers("caps_w");
    if (gpu.caps_w.empty()) throw g.error("caps_w", "must list one cap per segment");
    gpu.note = g.string_or("note", "");
    const auto& models = g.at("models");
    if (!models.is_array() || models.empty()) throw g.error("models", "must be a non-empty array");
    for (std::size_t j = 0; j < models.size(); ++j) {
      const JsonFields mf(models[j], path, fmt::format("gpus[{}].models[{}].", i, j));
      ServeModelSpec model;
      model.model = mf.string("model");
      const auto precision = mf.string("precision");
      if (precision != "fp32" && precision != "fp16") throw mf.error("precision", "must be fp32 or fp16");
      model.precision = precision == "fp16" ? sim::Precision::fp16 : sim::Precision::fp32;
      model.note = mf.string_or("note", "");
      gpu.models.push_back(model);
    }
    m.gpus.push_back(std::move(gpu));
  }
  return m;
}

void validate_serve_matrix(const ServeMatrix& matrix, const sim::Catalog& catalog) {
  if (!(matrix.slo_s > 0.0) || !(matrix.segment_s > 0.0)) throw usage_error("serve matrix: the SLO and the segment must be positive");
  if (matrix.static_max_batch_size > matrix.model_max_batch_size) {
    throw usage_error(fmt::format("serve matrix: the static batch cap {} is above the model's bound {}",
                                  matrix.static_max_batch_size, matrix.model_max_batch_size));
  }
  for (const int b : matrix.oracle.batch_sizes) {
    if (b > matrix.model_max_batch_size) {
      throw usage_error(fmt::format("serve matrix: the oracle's batch size {} is above the model's bound {}", b,
                                    matrix.model_max_batch_size));
    }
  }
  for (const auto& a : matrix.algorithms) check_algorithm(a);
  for (const auto& g : matrix.gpus) {
    const auto& gpu = catalog.gpu(g.gpu);
    runtime::check_cap_schedule(g.schedule(matrix.segment_s), gpu);
    for (const auto& m : g.models) {
      const auto& model = catalog.model(m.model);
      if (model.training_only()) throw usage_error(fmt::format("serve matrix: {} is a training workload", model.id));
      if (model.precision != m.precision) {
        throw usage_error(fmt::format("serve matrix: {} runs in {} on the twin (capserve's profile is taken in it), not {}",
                                      model.id, sim::to_string(model.precision), sim::to_string(m.precision)));
      }
    }
  }
}

ServeRun serve_run_figures(const std::string& algorithm, const serve::SimulationReport& report) {
  ServeRun run;
  run.algorithm = algorithm;
  const auto to_figures = [](const serve::SegmentReport& s) {
    ServeFigures f;
    f.start_s = s.start_s;
    f.end_s = s.end_s;
    f.cap_w = s.cap_w;
    f.arrivals = s.arrivals;
    f.answered = s.answered;
    f.good = s.good;
    f.shed = s.shed;
    f.refused = s.refused;
    f.failed = s.failed;
    f.goodput_rps = s.goodput_rps;
    f.slo_attainment = s.slo_attainment;
    f.p99_s = s.p99_s;
    f.mean_power_w = s.mean_power_w;
    f.max_power_w = s.max_power_w;
    f.windows = s.windows;
    f.windows_over_cap = s.windows_over_cap;
    f.windows_over_cap_outside_transitions = s.windows_over_cap_outside_transitions;
    f.max_queued_requests = s.max_queued_requests;
    return f;
  };
  for (const auto& s : report.segments) run.segments.push_back(to_figures(s));
  run.total = to_figures(report.total);
  // Energy by segment, windows attributed by their middle as the simulation's tallies do.
  for (const auto& w : report.windows) {
    const double energy_j = w.power.empty() ? 0.0 : w.power.mean_w * (w.end_s - w.start_s);
    const double middle = 0.5 * (w.start_s + w.end_s);
    std::size_t k = 0;
    for (std::size_t i = run.segments.size(); i-- > 1;) {
      if (middle >= run.segments[i].start_s) {
        k = i;
        break;
      }
    }
    if (!run.segments.empty()) run.segments[k].energy_j += energy_j;
    run.total.energy_j += energy_j;
    ServeWindowPoint p;
    p.end_s = w.end_s;
    p.cap_w = w.cap_w;
    p.max_power_w = w.power.empty() ? 0.0 : w.power.max_w;
    p.p99_s = w.slo.p99_s;
    p.batch_cap = w.knobs.max_batch_size;
    p.sm_clock_mhz = w.sm_clock_mhz;
    p.queued_requests = w.queued_requests;
    p.over_cap = w.over_cap;
    run.windows.push_back(p);
  }
  return run;
}

const ServeRun* ServeCell::run(const std::string& algorithm) const {
  const auto it = std::find_if(runs.begin(), runs.end(), [&](const ServeRun& r) { return r.algorithm == algorithm; });
  return it == runs.end() ? nullptr : &*it;
}

double ServeModelResult::lowest_cap_capacity_rps() const {
  const auto* c = capacity_at(schedule.min_cap_w());
  return c != nullptr ? c->capacity_rps : 0.0;
}

const ServeCapacity* ServeModelResult::capacity_at(double cap_w) const {
  const auto it = std::find_if(capacities.begin(), capacities.end(), [cap_w](const ServeCapacity& c) { return c.cap_w == cap_w; });
  return it == capacities.end() ? nullptr : &*it;
}

ServeBenchReport run_serve_bench(const ServeMatrix& matrix, const sim::Catalog& catalog, const ServeBenchOptions& options) {
  validate_serve_matrix(matrix, catalog);
  ServeBenchReport report;
  report.matrix = matrix;
  report.seed = options.seed;
  report.sample_hz = options.sample_hz;
  report.algorithms = options.algorithms.empty() ? matrix.algorithms : options.algorithms;
  for (const auto& a : report.algorithms) check_algorithm(a);
  const bool needs_profile = std::any_of(report.algorithms.begin(), report.algorithms.end(), [](const std::string& a) {
    return a == kCapserve || control::needs_profile(a);
  });

  // One entry per GPU × model, with the twin's description and the settings the searches try.
  std::vector<ModelInputs> inputs;
  std::vector<std::vector<StaticSetting>> settings;
  for (const auto& g : matrix.gpus) {
    const auto& gpu = catalog.gpu(g.gpu);
    for (const auto& m : g.models) {
      ServeModelResult r;
      r.gpu = gpu.id;
      r.model = catalog.model(m.model).id;
      r.precision = m.precision;
      r.note = m.note;
      r.schedule = g.schedule(matrix.segment_s);
      report.results.push_back(std::move(r));
      ModelInputs in;
      in.twin = ServeTwin{&gpu, &catalog.model(m.model), m.precision, options.sample_hz, matrix.slo_s, matrix.drain_s,
                          matrix.model_max_batch_size};
      inputs.push_back(std::move(in));
      settings.push_back(oracle_settings(matrix.oracle, gpu));
    }
  }
  report.oracle_settings = settings.empty() ? 0 : static_cast<int>(settings.front().size());

  // Phase 1: profiles and capacities (each cap of the schedule once, and the board's highest limit).
  struct CapacityTask {
    std::size_t result;
    double cap_w;
    bool uncapped;
  };
  std::vector<CapacityTask> capacity_tasks;
  for (std::size_t i = 0; i < report.results.size(); ++i) {
    for (const double cap : report.results[i].schedule.distinct_caps()) capacity_tasks.push_back({i, cap, false});
    capacity_tasks.push_back({i, inputs[i].twin.gpu->power_limit_max_w, true});
  }
  std::vector<ServeCapacity> capacities(capacity_tasks.size());
  const std::size_t profile_tasks = needs_profile ? report.results.size() : 0;
  std::size_t cell_tasks = 0;
  for (const auto& r : report.results) {
    cell_tasks += matrix.loads.size() * (r.schedule.steps().size() + report.algorithms.size());
  }
  const std::size_t total = profile_tasks + capacity_tasks.size() + cell_tasks;
  std::size_t done = 0;
  const auto finished_one = [&] {
    ++done;
    if (options.progress) options.progress(done, total);
  };
  parallel_for(
      profile_tasks + capacity_tasks.size(), options.threads,
      [&](std::size_t i) {
        if (i < profile_tasks) {
          inputs[i].profile = runtime::measure_default_profile(catalog, report.results[i].gpu, report.results[i].model,
                                                               options.sample_hz,
                                                               sim::derive_seed(options.seed, runtime::kProfileSeedStream));
          return;
        }
        const auto& task = capacity_tasks[i - profile_tasks];
        const auto& r = report.results[task.result];
        CapacitySearch search;
        search.cap_w = task.cap_w;
        search.duration_s = matrix.segment_s;
        const auto key = fmt::format("capacity/{}/{}/{:g}", r.gpu, r.model, task.cap_w);
        search.arrival_seed = seed_for(options.seed, key + "/arrivals");
        search.twin_seed = seed_for(options.seed, key + "/twin");
        capacities[i - profile_tasks] = find_capacity(inputs[task.result].twin, settings[task.result], search);
      },
      finished_one);
  for (std::size_t i = 0; i < capacity_tasks.size(); ++i) {
    auto& r = report.results[capacity_tasks[i].result];
    if (capacity_tasks[i].uncapped) {
      r.uncapped = capacities[i];
    } else {
      r.capacities.push_back(capacities[i]);
    }
  }

  // Phase 2: every cell — the oracle's search of each segment (the heavy tasks, first) and every
  // algorithm's run.
  struct CellTask {
    std::size_t result;
    std::size_t cell;
    std::optional<std::size_t> segment;    // an oracle search
    std::optional<std::size_t> algorithm;  // a run
  };
  std::vector<CellTask> oracle_tasks;
  std::vector<CellTask> run_tasks;
  for (std::size_t i = 0; i < report.results.size(); ++i) {
    auto& r = report.results[i];
    const auto segments = r.schedule.steps().size();
    for (std::size_t l = 0; l < matrix.loads.size(); ++l) {
      ServeCell cell;
      cell.load = matrix.loads[l];
      cell.rate_rps = cell.load * r.lowest_cap_capacity_rps();
      if (!(cell.rate_rps > 0.0)) {
        throw Error(ErrorCode::internal, fmt::format("serve: no static setting serves {} on the {} under {:g} W", r.model,
                                                     r.gpu, r.schedule.min_cap_w()));
      }
      cell.runs.resize(report.algorithms.size());
      cell.oracle.resize(segments);
      r.cells.push_back(std::move(cell));
      for (std::size_t k = 0; k < segments; ++k) oracle_tasks.push_back({i, l, k, std::nullopt});
      for (std::size_t a = 0; a < report.algorithms.size(); ++a) run_tasks.push_back({i, l, std::nullopt, a});
    }
  }
  std::vector<CellTask> tasks = oracle_tasks;
  tasks.insert(tasks.end(), run_tasks.begin(), run_tasks.end());
  parallel_for(
      tasks.size(), options.threads,
      [&](std::size_t t) {
        const auto& task = tasks[t];
        auto& r = report.results[task.result];
        auto& cell = r.cells[task.cell];
        const auto seeds = serve_cell_seeds(options.seed, r.gpu, r.model, cell.load);
        const auto arrival_seed = seeds.arrivals;
        const auto twin_seed = seeds.twin;
        if (task.algorithm) {
          cell.runs[*task.algorithm] = run_algorithm(report.algorithms[*task.algorithm], matrix, inputs[task.result],
                                                     r.schedule, cell.rate_rps, arrival_seed, twin_seed);
          return;
        }
        const auto k = *task.segment;
        OracleSearch search;
        search.cap_w = r.schedule.steps()[k].cap_w;
        search.duration_s = matrix.segment_s;
        search.arrivals_s = segment_arrivals(cell.rate_rps, arrival_seed, matrix.segment_s, r.schedule.steps().size(), k);
        search.twin_seed = sim::derive_seed(twin_seed, k + 1);
        search.capacity = r.capacity_at(search.cap_w);
        auto segment = search_oracle_segment(inputs[task.result].twin, settings[task.result], search);
        const double start = matrix.segment_s * static_cast<double>(k);
        segment.figures.start_s += start;
        segment.figures.end_s += start;
        for (auto& w : segment.windows) w.end_s += start;
        cell.oracle[k] = std::move(segment);
      },
      finished_one);
  return report;
}

}  // namespace gpucap::bench
