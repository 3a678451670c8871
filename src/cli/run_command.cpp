// gpucap run: one power-capped inference job on the simulated GPU.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <functional>
#include <memory>
#include <numeric>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "gpucap/cli/commands.hpp"
#include "live_metrics.hpp"
#include "gpucap/core/atomic_file.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/device/nvml_device.hpp"
#include "gpucap/predict/fitted.hpp"
#include "gpucap/runtime/mps_engine.hpp"
#include "gpucap/runtime/mps_planning.hpp"
#include "gpucap/runtime/nvml_platform.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/engine/torch_plugin.hpp"
#include "gpucap/sim/catalog.hpp"
#include "run_cluster.hpp"
#include "run_report.hpp"

namespace gpucap::cli {

namespace {

struct RunFlags {
  const CLI::Option* sample_hz_option = nullptr;  // given or not: --sample-hz has a default
  std::string platform = "sim";
  std::optional<std::string> gpu;  // sim: the twin (default p40)
  std::optional<std::string> model;
  std::optional<std::string> dataset;  // sim: default imagenet
  std::string algorithm;
  std::optional<double> power_cap_w;
  std::optional<std::string> cap_schedule;
  std::optional<long long> images;
  std::optional<double> duration_s;
  std::string seed = "1";
  double sample_hz = 100.0;
  std::optional<std::string> precision;
  std::string input_pipeline = "none";
  bool autotune_new_shapes = false;
  std::string sampler = "fixed";
  std::optional<double> governor_clock_mhz;  // sim: the boost governor's clock when nothing locks one
  std::optional<int> bobd_budget;
  std::optional<std::string> params_dir;  // pctodl, directcap: PctoDL's fits
  std::optional<std::string> fitted_path; // mpsfit: gpucap's fitted predictor
  std::optional<double> mps_round_s;      // nvml, MPS tenants: one round of the workers (default 1 s)
  std::string trace_path;
  bool json = false;
  ControllerFlags controller;
  LiveFlags live;  // --metrics, --pace
  // --platform nvml
  RealGpuFlags real;
  bool allow_gpu_control = false;
  std::optional<std::string> search_out;
  std::optional<double> trial_warmup_s;   // nvml: default runtime::kPreRunWarmupS
  std::optional<double> trial_measure_s;  // nvml: default runtime::kPreRunMeasureS
  ClusterNodeFlags cluster;  // --cluster-etcd: the run is a node of a cluster (twin only)
};

// Rows go to disk as they are produced (into FILE.partial-XXXXXX beside FILE, which is replaced
// only when the run ends: a full disk or a failed run leaves the previous FILE as it was, and a
// run that fails half-way keeps its rows in the partial file and says where).
class TraceFile {
 public:
  explicit TraceFile(const std::string& path)
      : out_(path, AtomicFileWriter::Durability::sync, AtomicFileWriter::Unfinished::keep) {
    write(runtime::trace_csv_header());
  }
  void write(const std::string& text) { out_.write(text); }
  void commit() { out_.commit(); }

 private:
  AtomicFileWriter out_;
};

CapSchedule cap_schedule(const RunFlags& flags) {
  check_power_cap_flag(flags.power_cap_w);
  if (flags.cap_schedule) return schedule_from_flags(*flags.cap_schedule, flags.power_cap_w);
  if (!flags.power_cap_w) throw usage_error("give --power-cap W or --cap-schedule \"T:W,...\"");
  return CapSchedule::constant(*flags.power_cap_w);
}

std::optional<sim::Precision> precision(const RunFlags& flags) {
  if (!flags.precision) return std::nullopt;
  if (*flags.precision == "fp32") return sim::Precision::fp32;
  if (*flags.precision == "fp16") return sim::Precision::fp16;
  throw usage_error(fmt::format("--precision '{}' must be fp32 or fp16", *flags.precision));
}

// A trace file if --trace was given, and the sink that writes it.
struct TraceOutput {
  std::unique_ptr<TraceFile> file;
  runtime::TraceSink sink;
};

TraceOutput open_trace(const std::string& path, bool simulated) {
  TraceOutput out;
  if (path.empty()) return out;
  out.file = std::make_unique<TraceFile>(path);
  auto* file = out.file.get();
  out.sink = [file, simulated](const runtime::TraceRow& row) { file->write(runtime::trace_csv_row(row, simulated)); };
  return out;
}

// After the summary is printed: a run a signal stopped exits with its own code.
void report_stop(const runtime::RunSummary& summary) {
  if (summary.stopped) {
    throw Error(ErrorCode::interrupted, "stopped by a signal after the summary above; every GPU setting was restored");
  }
}

// The predictor of --fitted (Error(usage) for an algorithm other than mpsfit), read before
// anything starts.
std::optional<predict::FittedPredictor> fitted_predictor(const RunFlags& flags) {
  if (!flags.fitted_path) return std::nullopt;
  if (!control::plans_with_fitted_predictor(flags.algorithm)) {
    throw usage_error(fmt::format("--fitted does not apply to {} (only mpsfit plans with a fitted predictor)",
                                  flags.algorithm));
  }
  return predict::FittedPredictor::load(*flags.fitted_path);
}

// --bobd-budget, checked; nullopt when not given.
std::optional<std::size_t> search_budget(const RunFlags& flags) {
  if (!flags.bobd_budget) return std::nullopt;
  if (!control::needs_offline_search(flags.algorithm)) {
    throw usage_error(fmt::format("--bobd-budget does not apply to {}", flags.algorithm));
  }
  if (*flags.bobd_budget < 1 || *flags.bobd_budget > 100'000) {
    throw usage_error(fmt::format("--bobd-budget {} must be between 1 and 100000", *flags.bobd_budget));
  }
  return static_cast<std::size_t>(*flags.bobd_budget);
}

// --sampler: fixed or nvidia-smi.
bool spawned_nvidia_smi(const std::string& sampler) {
  if (sampler == "fixed") return false;
  if (sampler == "nvidia-smi") return true;
  throw usage_error(fmt::format("--sampler '{}' must be fixed or nvidia-smi", sampler));
}

void run_on_twin(const RunFlags& flags, const GlobalOptions& global) {
  flags.real.reject_on_twin("sim");
  reject_for_platform(flags.allow_gpu_control, "--allow-gpu-control", "sim");
  reject_for_platform(flags.search_out.has_value(), "--search-out", "sim (the twin's profile and search take seconds)");
  reject_for_platform(flags.trial_warmup_s.has_value() || flags.trial_measure_s.has_value(), "--trial-warmup-s/--trial-measure-s",
                      "sim");
  reject_for_platform(flags.mps_round_s.has_value(), "--mps-round-s", "sim (the twin's MPS tenants share in virtual time)");
  if (!flags.model) throw usage_error("--model is required on the simulated GPU (see 'gpucap list models')");
  const auto catalog = sim::Catalog::load(resolve_data_dir(global));
  runtime::SimJobSpec spec;
  spec.gpu = flags.gpu.value_or("p40");
  spec.model = *flags.model;
  spec.dataset = flags.dataset.value_or("imagenet");
  spec.algorithm = flags.algorithm;
  RunClusterNode::check(flags.cluster, spec.algorithm, flags.live.pace_factor(), flags.power_cap_w || flags.cap_schedule);
  // A cluster node starts at its lowest cap: the board's lowest limit (and what the twin draws loaded).
  const auto& spec_gpu = catalog.gpu(spec.gpu);
  const double lowest_cap_w =
      std::max(spec_gpu.power_limit_min_w, std::round(runtime::lowest_loaded_power_w(spec_gpu) * 10.0) / 10.0);
  spec.schedule = flags.cluster.enabled() ? CapSchedule::constant(lowest_cap_w) : cap_schedule(flags);
  if (flags.images && (*flags.images < 1 || *flags.images > runtime::kMaxRunImages)) {
    throw usage_error(fmt::format("--images must be between 1 and {}", runtime::kMaxRunImages));
  }
  spec.images = flags.images.value_or(0);
  if (flags.duration_s && *flags.duration_s <= 0.0) throw usage_error("--duration must be > 0 s");
  spec.duration_s = flags.duration_s.value_or(0.0);
  spec.precision = precision(flags);
  spec.pipeline = sim::parse_pipeline_mode(flags.input_pipeline);
  if (const auto& path = flags.controller.profile_path()) {
    // A real GPU's profile of the model is taken too: the twin's capfit then plans from the real
    // GPU's figures (scripts/gpu_measure_report.py compares it so with the real run). Its GPU is
    // named by NVML, not by the twin's id, and is not compared.
    const auto measured = predict::load_profile_origin(*path);
    auto check = twin_profile_check(spec_gpu.id, catalog.model(spec.model).id);  // the ids tune writes, not the flags' spelling
    if (measured.simulated == false) {
      check.here.simulated.reset();
      check.here.gpu.reset();
    }
    check_profile_origin(*path, measured, check);
  }
  spec.controller = flags.controller.options();
  spec.sim.seed = parse_seed(flags.seed);
  spec.sim.sample_hz = flags.sample_hz;
  spec.sim.autotune_new_shapes = flags.autotune_new_shapes;
  spec.sim.spawned_nvidia_smi = spawned_nvidia_smi(flags.sampler);
  if (spec.sim.spawned_nvidia_smi && flags.sample_hz_option->count() > 0) {
    throw usage_error("--sample-hz does not apply with --sampler nvidia-smi: it reads power at nvidia-smi's own pace");
  }
  spec.sim.governor_sm_clock_mhz = flags.governor_clock_mhz;
  if (const auto budget = search_budget(flags)) spec.search_budget = *budget;
  if (control::needs_mps_planning(spec.algorithm) && !control::plans_with_fitted_predictor(spec.algorithm)) {
    spec.pctodl_params_dir = resolve_pctodl_params_dir(flags.params_dir);
  } else if (flags.params_dir) {
    throw usage_error(fmt::format("--params does not apply to {}", spec.algorithm));
  }
  if (const auto fitted = fitted_predictor(flags)) {
    // mpsfit from a predictor fitted to a profile (else the twin profiles the model before the run).
    spec.controller.mps_planning = runtime::fitted_planning(catalog.gpu(spec.gpu).sm_clocks_mhz, *fitted);
  }

  spec.sim.pace = flags.live.pace_factor();
  flags.live.check_address();

  const auto& gpu = catalog.gpu(spec.gpu);
  // --metrics bound before anything runs or any file is made: a bad or busy address fails first.
  const auto metrics = start_run_live(flags.live, run_labels(spec.algorithm, spec.model, gpu.id, 0, true), true);
  // A cluster node joins just before the job runs; its allocation is the job's cap from then on.
  std::unique_ptr<RunClusterNode> cluster_node;
  if (flags.cluster.enabled()) {
    cluster_node = std::make_unique<RunClusterNode>(flags.cluster, gpu, catalog.model(spec.model), lowest_cap_w);
    spec.live_cap = cluster_node->timeline();
  }
  runtime::SimJob job(catalog, spec);  // validates before any file is created
  auto trace = open_trace(flags.trace_path, /*simulated=*/true);
  const auto live = attach_run_export(metrics.get(), job.platform(),
                                      flags.live.labelled(monitor::twin_identity(0, gpu.name, monitor::local_hostname())));
  flags.live.warn_if_unpaced("run");
  const StopOnSignals stop_on_signals;
  auto sink = live ? live->sink(trace.sink) : trace.sink;
  if (cluster_node) sink = cluster_node->observing(std::move(sink));
  const auto summary = job.run(sink, &stop_requested, live ? live->power_sink() : runtime::PowerSampleSink{});
  cluster_node.reset();  // leaves the cluster
  if (trace.file) trace.file->commit();
  if (flags.json) {
    std::cout << to_json(spec, catalog, summary).dump(2) << "\n";
  } else {
    print_text(spec, catalog, summary);
    if (trace.file) fmt::print("  trace                  {}\n", flags.trace_path);
  }
  report_stop(summary);
}

EngineFlags engine_flags(const RunFlags& flags) {
  return flags.real.engine(flags.seed, flags.precision);
}

// capfit's profile and bobd's search, on the real GPU before the run (unless a profile was given):
// fixed-configuration trials, every one written to --search-out as it is measured.
void measure_before_run(const RunFlags& flags, runtime::NvmlPlatform& platform, const CapSchedule& schedule,
                        std::optional<std::size_t> budget, control::ControllerOptions& options) {
  const bool profile = control::needs_profile(flags.algorithm) && !options.profile;
  const bool search = control::needs_offline_search(flags.algorithm) && !options.tuned_table;
  if (!profile && !search) return;
  const runtime::PlatformTrialOptions trial_options{flags.trial_warmup_s.value_or(runtime::kPreRunWarmupS),
                                                    flags.trial_measure_s.value_or(runtime::kPreRunMeasureS),
                                                    flags.allow_gpu_control, &stop_requested};
  std::optional<runtime::TrialFile> file;
  if (flags.search_out) file.emplace(*flags.search_out, trial_setup(engine_flags(flags), platform.gpu(), trial_options, flags.sample_hz));
  runtime::PlatformTrialRunner runner(platform, trial_options);
  std::size_t trials = 0;
  auto measure = runtime::cached_measure(runner, file ? &*file : nullptr,
                                         [&trials](const tune::ConfigPoint& p, const tune::TrialResult& r, bool measured_now) {
                                           fmt::print(stderr, "  trial {:>3}  {:<32} {:>9.2f} img/s {:>7.2f} W  [{}]\n", ++trials,
                                                      describe(p), r.throughput_img_s, r.max_power_w,
                                                      measured_now ? "measured" : "from --search-out");
                                         });
  const StopOnSignals stop_on_signals;
  const auto limits = platform.controller_limits();
  // The controller's own checks of its options come first: a bad --window must not wait for the
  // measurements. A stand-in profile or table takes the place of what is measured below.
  auto check = options;
  if (profile) {
    const double mhz = limits.dvfs_levels_mhz.empty() ? 1.0 : limits.dvfs_levels_mhz.back();
    check.profile = std::make_shared<const predict::ProfileModel>(
        std::vector<predict::ProfileSample>{{1, mhz, std::nullopt, 1.0, 1.0}, {4096, mhz, std::nullopt, 2.0, 2.0}});
  }
  if (search) {
    check.tuned_table = std::make_shared<const control::CapTable>(
        control::CapTable{control::TunedEntry{schedule.min_cap_w(), single_tenant_knobs(1)}});
  }
  (void)control::make_controller(flags.algorithm, check, limits);
  if (profile) {
    const auto space = runtime::real_profile_space(limits, flags.allow_gpu_control, options.batch_sizes);
    fmt::print(stderr, "capfit: profiling the model first, {} configurations{}\n", space.size(),
               flags.allow_gpu_control ? "" : " (batch sizes at the GPU's own clocks: no --allow-gpu-control)");
    std::vector<tune::Trial> measured;
    for (std::size_t i = 0; i < space.size(); ++i) measured.push_back(tune::Trial{space.point(i), measure(space.point(i))});
    options.profile = std::make_shared<const predict::ProfileModel>(runtime::profile_samples(measured));
    return;
  }
  // BOBD's range, as on the twin: batch sizes 1-256 × the GPU's DVFS ladder (or its own clocks).
  auto space = runtime::real_profile_space(limits, flags.allow_gpu_control, std::nullopt);
  space.batch_sizes.resize(256);
  std::iota(space.batch_sizes.begin(), space.batch_sizes.end(), 1);
  if (flags.allow_gpu_control) space.sm_clocks_mhz = limits.dvfs_levels_mhz;
  const auto caps = schedule.distinct_caps();
  fmt::print(stderr, "bobd: searching {} configurations for each of {} caps first{}\n", space.size(), caps.size(),
             flags.allow_gpu_control ? "" : " (batch sizes at the GPU's own clocks: no --allow-gpu-control)");
  auto table = runtime::cap_table(runtime::search_each_cap("bobd", space, caps, measure, budget.value_or(0), parse_seed(flags.seed)));
  if (!flags.allow_gpu_control) {
    for (auto& entry : table) entry.knobs = single_tenant_knobs(entry.knobs.batch_size());  // the clock was a label
  }
  options.tuned_table = std::make_shared<const control::CapTable>(std::move(table));
}

// pctodl and directcap on a real GPU plan with PctoDL's published fits (seed-systems.md §2): the
// twin GPU whose name the NVML name contains, and the model named by the TorchScript file's stem.
std::shared_ptr<const control::MpsPlanning> published_pctodl_planning(const RunFlags& flags, const GlobalOptions& global,
                                                                       const device::NvmlDeviceInfo& device) {
  const auto& nvml_name = device.name;
  const auto catalog = sim::Catalog::load(resolve_data_dir(global));
  const sim::GpuSpec* gpu = nullptr;
  for (const auto& g : catalog.gpus()) {
    if (to_lower(nvml_name).find(to_lower(g.name)) != std::string::npos) gpu = &g;
  }
  if (gpu == nullptr) {
    throw usage_error(fmt::format("{} plans with PctoDL's published fits, which cover the GeForce RTX 3080 Ti and the "
                                  "A100-SXM4-40GB, not {}; "
                                  "use mpsfit (fitted to a profile of this GPU, docs/mps.md)",
                                  flags.algorithm, nvml_name));
  }
  const auto stem = std::filesystem::path(*flags.real.model_file).stem().string();
  const sim::ModelSpec* model = nullptr;
  for (const auto& m : catalog.models()) {
    if (m.id == stem) model = &m;
  }
  if (model == nullptr) {
    throw usage_error(fmt::format("{} finds PctoDL's fits by the model file's name: '{}' is no model gpucap knows (name the "
                                  "file after one, e.g. resnet50.pt; see 'gpucap list models')",
                                  flags.algorithm, stem));
  }
  // It plans over the clocks both the fits and this board know (a board may lock fewer).
  auto spec = *gpu;
  std::erase_if(spec.sm_clocks_mhz, [&device](double mhz) {
    return std::none_of(device.sm_clocks_mhz.begin(), device.sm_clocks_mhz.end(), [mhz](double c) { return std::abs(c - mhz) < 0.5; });
  });
  if (spec.sm_clocks_mhz.empty()) throw Error(ErrorCode::unsupported, fmt::format("{} supports none of the {}'s SM clocks", nvml_name, gpu->name));
  return runtime::pctodl_planning(catalog, spec, *model, resolve_pctodl_params_dir(flags.params_dir));
}

void run_on_nvml(const RunFlags& flags, const GlobalOptions& global) {
  check_cluster_node_flags(flags.cluster);
  if (flags.cluster.enabled()) {
    throw usage_error("--cluster-etcd: run joins a cluster on the twin only for now (on a real GPU, gpucap serve joins one)");
  }
  reject_for_platform(flags.gpu.has_value(), "--gpu", "nvml (use --device N)");
  reject_for_platform(flags.model.has_value(), "--model", "nvml (use --model-file FILE.pt)");
  reject_for_platform(flags.input_pipeline != "none", "--input-pipeline", "nvml");
  reject_for_platform(flags.autotune_new_shapes, "--autotune-new-shapes", "nvml");
  reject_for_platform(flags.sampler != "fixed", "--sampler", "nvml");
  reject_for_platform(flags.governor_clock_mhz.has_value(), "--governor-clock", "nvml (the real GPU's governor decides)");
  reject_for_platform(flags.dataset.has_value(), "--dataset", "nvml (use --images-dir, or synthetic images)");
  reject_for_platform(flags.live.pace.has_value(), "--pace", "nvml (a real GPU runs in real time)");
  flags.live.check_address();
  const auto fitted = fitted_predictor(flags);
  const bool mps = control::needs_mps_planning(flags.algorithm);
  const bool published_fits = mps && !control::plans_with_fitted_predictor(flags.algorithm);  // pctodl, directcap
  if (flags.params_dir && !published_fits) throw usage_error(fmt::format("--params does not apply to {}", flags.algorithm));
  if (mps && !published_fits && !flags.fitted_path) {
    throw usage_error(fmt::format("{} on a real GPU plans with a predictor fitted to a profile of it: --fitted "
                                  "MODEL.json ('gpucap profile --platform nvml', then 'gpucap fit')",
                                  flags.algorithm));
  }
  if (!flags.real.model_file) throw usage_error("--model-file FILE.pt is required on a real GPU (scripts/export_models.py)");
  const auto budget = search_budget(flags);
  if (flags.search_out && !control::needs_profile(flags.algorithm) && !control::needs_offline_search(flags.algorithm)) {
    throw usage_error(fmt::format("--search-out does not apply to {} (only capfit's profile and bobd's search measure "
                                  "before the run)",
                                  flags.algorithm));
  }
  if ((flags.trial_warmup_s || flags.trial_measure_s) && !control::needs_profile(flags.algorithm) &&
      !control::needs_offline_search(flags.algorithm)) {
    throw usage_error(fmt::format("--trial-warmup-s/--trial-measure-s do not apply to {} (only capfit's profile and "
                                  "bobd's search measure trials before the run)",
                                  flags.algorithm));
  }
  if (flags.mps_round_s && !mps) {
    throw usage_error(fmt::format("--mps-round-s does not apply to {}: it paces MPS tenants' worker processes "
                                  "(pctodl, directcap, mpsfit)",
                                  flags.algorithm));
  }
  (void)engine::parse_torch_precision(flags.precision.value_or("fp32"));  // before anything starts
  runtime::RunConfig config;
  config.schedule = cap_schedule(flags);
  if (flags.images && (*flags.images < 1 || *flags.images > runtime::kMaxRunImages)) {
    throw usage_error(fmt::format("--images must be between 1 and {}", runtime::kMaxRunImages));
  }
  if (flags.duration_s && *flags.duration_s <= 0.0) throw usage_error("--duration must be > 0 s");
  config.images = flags.images.value_or(0);
  config.duration_s = flags.duration_s.value_or(0.0);
  if (config.images == 0 && config.duration_s == 0.0) {
    throw usage_error("give --images N or --duration S (a real GPU has no dataset size to default to)");
  }
  runtime::check_run_limits(config.images, config.duration_s);
  runtime::check_sample_hz(flags.sample_hz);

  // --profile: checked before the model is loaded (what the flags say), and against the GPU once
  // NVML names it.
  auto profile_check = real_profile_check(flags.real, engine_flags(flags), flags.allow_gpu_control);
  std::optional<predict::ProfileOrigin> profile_origin;
  if (const auto& path = flags.controller.profile_path()) {
    profile_origin = predict::load_profile_origin(*path);
    check_profile_origin(*path, *profile_origin, profile_check);
  }
  const auto options = flags.real.platform(flags.allow_gpu_control, flags.sample_hz);
  // With MPS tenants the model runs in worker processes (one per tenant), not in gpucap.
  const auto device_info = [&flags] {
    const device::NvmlLibrary nvml(flags.real.nvml_library);
    return device::NvmlDevice(nvml, flags.real.device_index, false).info();
  };
  std::shared_ptr<const control::MpsPlanning> published;
  std::optional<runtime::MpsPoolOptions> pool;
  if (mps) {
    if (!flags.real.model_file) throw usage_error("--model-file FILE.pt is required on a real GPU (scripts/export_models.py)");
    const auto info = device_info();
    if (published_fits) published = published_pctodl_planning(flags, global, info);  // before any worker starts
    pool = mps_pool_options(engine_flags(flags), info.uuid);
  }
  const double mps_round_s = flags.mps_round_s.value_or(1.0);
  if (!(mps_round_s >= 0.05 && mps_round_s <= 60.0)) {
    throw usage_error(fmt::format("--mps-round-s {:g} must be between 0.05 and 60", mps_round_s));
  }
  runtime::NvmlPlatform platform(options, [&flags, &pool, mps_round_s](std::function<double()> now_s) -> std::unique_ptr<engine::Engine> {
    if (pool) return std::make_unique<runtime::MpsPoolEngine>(*pool, std::move(now_s), mps_round_s);
    return engine::load_torch_engine(torch_engine_options(engine_flags(flags)), std::move(now_s));
  });
  const auto& info = platform.gpu().info();
  config.schedule.check_range(0.0, info.power_limit_max_w,
                              fmt::format("what the {} can draw (up to its highest power limit)", info.name));
  if (profile_origin) {
    profile_check.here.gpu = info.name;
    check_profile_origin(*flags.controller.profile_path(), *profile_origin, profile_check);
  }
  auto controller_options = flags.controller.options();
  if (fitted) controller_options.mps_planning = runtime::fitted_planning(info.sm_clocks_mhz, *fitted);
  if (published) controller_options.mps_planning = published;
  controller_options.gpu_chooses_clocks = !flags.allow_gpu_control;
  // --metrics (a busy address fails here) and the trace file: before minutes of measurements, not after.
  const auto metrics = start_run_live(
      flags.live, run_labels(flags.algorithm, std::filesystem::path(*flags.real.model_file).stem().string(), info.name, info.index,
                 false),
      false);
  auto trace = open_trace(flags.trace_path, /*simulated=*/false);
  const auto live =
      attach_run_export(metrics.get(), platform, flags.live.labelled(monitor::nvml_identity(info, monitor::local_hostname())));
  measure_before_run(flags, platform, config.schedule, budget, controller_options);
  const auto controller = control::make_controller(flags.algorithm, controller_options, platform.controller_limits());
  const StopOnSignals stop_on_signals;
  config.stop = &stop_requested;
  if (live) config.on_power_sample = live->power_sink();
  const auto summary = runtime::run_job(platform, *controller, config, live ? live->sink(trace.sink) : trace.sink);
  if (trace.file) trace.file->commit();
  if (flags.json) {
    auto out = summary_json(summary);
    out.update(nlohmann::json{{"platform", "nvml"},
                              {"gpu", info.name},
                              {"uuid", info.uuid},
                              {"model_file", *flags.real.model_file},
                              {"engine", platform.engine().name()},
                              {"algorithm", flags.algorithm},
                              {"cap", config.schedule.to_string()},
                              {"device_writes", summary.device_writes},
                              {"power_samples_dropped", platform.sampler().dropped()}});
    std::cout << out.dump(2) << "\n";
  } else {
    fmt::print("gpucap run on a REAL {} (GPU {}, {})\n", info.name, info.index, info.uuid);
    fmt::print("  engine {}, algorithm {}, cap {}\n", platform.engine().name(), flags.algorithm,
               config.schedule.to_string());
    print_summary_lines(summary);
    if (trace.file) fmt::print("  trace                  {}\n", flags.trace_path);
  }
  report_stop(summary);
}

}  // namespace

Command add_run_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand("run", "Run one power-capped inference job on the simulated GPU or a real one");
  cmd->add_option("--platform", flags->platform,
                  "sim: the GPU twin, virtual time; nvml: a real NVIDIA GPU (NVML + the LibTorch engine)")
      ->capture_default_str();
  cmd->add_option("--gpu", flags->gpu, "sim: GPU twin (see 'gpucap list gpus'; default p40)");
  cmd->add_option("--model", flags->model, "sim: model (see 'gpucap list models')");
  cmd->add_option("--dataset", flags->dataset,
                  "sim: dataset, sets the number of images (see 'gpucap list datasets'; default imagenet)");
  cmd->add_option("--algorithm", flags->algorithm, "Controller (see 'gpucap list algorithms')")->required();
  cmd->add_option("--power-cap", flags->power_cap_w, "Power cap in W (or the cap before the schedule's first step)");
  cmd->add_option("--cap-schedule", flags->cap_schedule,
                  "Cap steps 'T:W,...' in seconds from the start, e.g. \"0:150,85:125,170:100\"");
  cmd->add_option("--images", flags->images, "Images to process (sim default: the dataset's size)");
  cmd->add_option("--duration", flags->duration_s,
                  "Stop after this many seconds (virtual on the twin); without --images the image count is then "
                  "unlimited");
  cmd->add_option("--seed", flags->seed, "Seed of the twin's noise (same seed, same run); on nvml, of the input")
      ->capture_default_str();
  flags->sample_hz_option = cmd->add_option("--sample-hz", flags->sample_hz, "Power sampling rate in Hz")->capture_default_str();
  cmd->add_option("--precision", flags->precision, "fp32 or fp16; nvml also bf16 (sim default: the model's; nvml default: fp32)");
  cmd->add_option("--input-pipeline", flags->input_pipeline,
                  "sim: host-side JPEG decode per image (cost from the dataset file): none, serial (decode, then "
                  "compute, as the BatchDVFS harness did) or overlapped")
      ->capture_default_str();
  cmd->add_flag("--autotune-new-shapes", flags->autotune_new_shapes,
                "sim: the engine autotunes each batch size it has not run before (TF1 + cuDNN, PyTorch with "
                "cudnn.benchmark): that batch takes longer, at busy power (cost from the GPU file)");
  cmd->add_option("--sampler", flags->sampler,
                  "sim: how power is sampled: fixed (every 1/--sample-hz) or nvidia-smi (as the BatchDVFS harness: "
                  "cycles of two spawned nvidia-smi processes and a 0.1-s sleep, a reading when the first process "
                  "returns, each process stalling the host side of the batch running when it starts (its decode, input "
                  "copy and kernel launches; kernels already queued run on), and a 1-s wait after a batch "
                  "that leaves its window without a reading; timing from the GPU file's host.nvidia_smi_*)")
      ->capture_default_str();
  cmd->add_option("--governor-clock", flags->governor_clock_mhz,
                  "sim: the SM clock (MHz) the twin's boost governor holds while no controller locks one (default: "
                  "the GPU's boost clock), e.g. a real run's clock from its nvidia-smi log when the GPU settled lower");
  cmd->add_option("--bobd-budget", flags->bobd_budget,
                  "bobd: fixed-configuration measurements per cap in its offline search on the twin before the "
                  "run (default 50, as upstream)");
  cmd->add_option("--fitted", flags->fitted_path,
                  "mpsfit: gpucap's predictor fitted to a profile of the model ('gpucap fit'; required on a real GPU, "
                  "on the twin it replaces the profile gpucap takes before the run)");
  cmd->add_option("--mps-round-s", flags->mps_round_s,
                  "nvml, MPS tenants (pctodl, directcap, mpsfit): seconds each round of the worker processes runs (a "
                  "window holds several; default 1)");
  cmd->add_option("--params", flags->params_dir,
                  "pctodl, directcap: PctoDL's parameter folder (default: $GPUCAP_PCTODL_PARAMS, else "
                  "../shared/data/pctodl)");
  cmd->add_flag("--allow-gpu-control", flags->allow_gpu_control,
                "nvml: let the controller lock clocks and set the power limit (needs root; every setting is "
                "restored at exit, and after a crash by the next gpucap start)");
  cmd->add_option("--search-out", flags->search_out,
                  "nvml, capfit and bobd: keep the trials measured before the run (capfit's profile, bobd's search) "
                  "in this JSON file as they are measured; a run started again with it does not measure them again")
      ->check(output_path());
  cmd->add_option("--trial-warmup-s", flags->trial_warmup_s,
                  "nvml, capfit and bobd: warm-up of each trial measured before the run, seconds (default 1)");
  cmd->add_option("--trial-measure-s", flags->trial_measure_s,
                  "nvml, capfit and bobd: measurement of each trial before the run, seconds (default 2)");
  cmd->add_option("--trace", flags->trace_path, "Write one CSV row per window to this file")->check(output_path());
  cmd->add_flag("--json", flags->json, "Print the summary as JSON");
  flags->real.add_to(*cmd);
  flags->controller.add_to(*cmd);
  flags->live.add_to(*cmd, /*with_pace=*/true);
  add_cluster_node_flags(*cmd, flags->cluster);

  return Command{cmd, [flags, &global] {
                   stop_requested.store(false);
                   if (flags->platform == "sim") {
                     run_on_twin(*flags, global);
                   } else if (flags->platform == "nvml") {
                     run_on_nvml(*flags, global);
                   } else {
                     throw usage_error(fmt::format("--platform '{}' must be sim or nvml", flags->platform));
                   }
                 }};
}

}  // namespace gpucap::cli
