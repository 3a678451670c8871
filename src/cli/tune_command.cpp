// gpucap tune: offline search for the best configuration under a cap, on the simulated GPU or on a
// real one (NVML + the LibTorch engine), where every trial is a real measurement, written to
// --out as it is made so that a killed search resumes where it stopped.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/runtime/nvml_platform.hpp"
#include "gpucap/runtime/platform_tuning.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/runtime/tuning.hpp"
#include "gpucap/tune/registry.hpp"

namespace gpucap::cli {

namespace {

struct TuneFlags {
  std::string platform = "sim";
  std::string algorithm;
  std::optional<std::string> gpu;
  std::optional<std::string> model;
  double power_cap_w = 0.0;
  std::optional<long long> budget;
  double measure_s = 3.0;
  std::optional<std::string> batch_sizes;
  std::optional<std::string> clock_levels;
  std::optional<std::string> memory_clocks;
  std::string seed = "1";
  double sample_hz = 100.0;
  bool json = false;
  // nvml
  RealGpuFlags real;
  std::optional<std::string> precision;
  bool allow_gpu_control = false;
  double warmup_s = 2.0;
  std::optional<std::string> out;
};

tune::SearchSpace search_space(const TuneFlags& flags, const sim::GpuSpec& gpu) {
  auto space = runtime::default_search_space(gpu);
  if (flags.batch_sizes) space.batch_sizes = control::parse_batch_sizes(*flags.batch_sizes);
  if (flags.clock_levels) space.sm_clocks_mhz = control::parse_clock_levels(*flags.clock_levels);
  if (flags.memory_clocks) space.memory_clocks_mhz = control::parse_clock_levels(*flags.memory_clocks);
  space.validate();
  return space;
}

std::string space_text(const tune::SearchSpace& space) {
  auto text = fmt::format("{} batch sizes × {} SM clocks", space.batch_sizes.size(), space.sm_clocks_mhz.size());
  if (!space.memory_clocks_mhz.empty()) text += fmt::format(" × {} memory clocks", space.memory_clocks_mhz.size());
  return text + fmt::format(" = {} configurations", space.size());
}

nlohmann::json trial_json(const tune::Trial& trial) {
  nlohmann::json j = {{"batch_size", trial.point.batch_size},
                      {"sm_clock_mhz", trial.point.sm_clock_mhz},
                      {"throughput_img_s", trial.result.throughput_img_s},
                      {"max_power_w", trial.result.max_power_w},
                      {"mean_power_w", trial.result.mean_power_w}};
  j["memory_clock_mhz"] = trial.point.memory_clock_mhz ? nlohmann::json(*trial.point.memory_clock_mhz) : nullptr;
  return j;
}

// Running best feasible throughput after each trial; null until one is feasible.
nlohmann::json trials_json(const std::vector<tune::Trial>& trials, double cap_w) {
  nlohmann::json out = nlohmann::json::array();
  std::optional<tune::Trial> best;
  for (const auto& t : trials) {
    if (tune::improves(t.result, best, cap_w)) best = t;
    auto j = trial_json(t);
    j["best_so_far_img_s"] = best ? nlohmann::json(best->result.throughput_img_s) : nlohmann::json();
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json result_json(const TuneFlags& flags, const std::string& gpu_id, const std::string& model_id,
                           const tune::SearchSpace& space, std::size_t budget, const runtime::TuneOutcome& outcome) {
  return {{"simulated", flags.platform == "sim"},
          {"algorithm", flags.algorithm},
          {"gpu", gpu_id},
          {"model", model_id},
          {"cap_w", flags.power_cap_w},
          {"space_size", space.size()},
          {"budget", budget > 0 ? nlohmann::json(budget) : nlohmann::json()},  // null: the whole space
          {"measure_s", flags.measure_s},
          {"evaluations", outcome.trials.size()},
          {"cost_s", outcome.cost_s},
          {"best", outcome.best ? trial_json(*outcome.best) : nlohmann::json()},
          {"trials", trials_json(outcome.trials, flags.power_cap_w)}};
}

void print_header(const TuneFlags& flags, const sim::GpuSpec& gpu, const tune::SearchSpace& space,
                  std::size_t budget) {
  fmt::print("gpucap tune ({}) on the SIMULATED {} (GPU twin, virtual time)\n", flags.algorithm, gpu.name);
  fmt::print("  model {}, cap {:g} W, {}, {:g} s per measurement", *flags.model, flags.power_cap_w,
             space_text(space), flags.measure_s);
  fmt::print("{}\n", budget > 0 ? fmt::format(", budget {}", budget) : std::string());
}

// One line per evaluation, printed as it happens, for tuners whose next proposal depends on the
// results so far (the oracle's fixed order would only add 2,560 lines of noise).
void print_trial(const std::vector<tune::Trial>& trials, const std::optional<tune::Trial>& best, double cap_w,
                 std::size_t point_width) {
  const auto& t = trials.back();
  fmt::print("  eval {:>3}  {:<{}} {:>9.2f} img/s {:>7.2f} W  {:<8}  best {}  [simulated]\n", trials.size(),
             describe(t.point), point_width, t.result.throughput_img_s, t.result.max_power_w,
             tune::feasible(t.result, cap_w) ? "feasible" : "over cap",
             best ? fmt::format("{:.2f} img/s", best->result.throughput_img_s) : std::string("none yet"));
}

void print_summary(const tune::SearchSpace& space, const runtime::TuneOutcome& outcome, const char* tag = "simulated") {
  const auto line = [tag](const char* label, const std::string& value) {
    fmt::print("  {:<22} {:>24}  [{}]\n", label, value, tag);
  };
  if (outcome.best) {
    line("best configuration", describe(outcome.best->point));
    line("throughput", fmt::format("{:.2f} img/s", outcome.best->result.throughput_img_s));
    line("window max power", fmt::format("{:.2f} W", outcome.best->result.max_power_w));
    line("mean power", fmt::format("{:.2f} W", outcome.best->result.mean_power_w));
  } else {
    line("best configuration", "none under the cap");
  }
  fmt::print("  {:<22} {:>24}\n", "evaluations", fmt::format("{} of {}", outcome.trials.size(), space.size()));
  line("search cost", fmt::format("{:.0f} s ({:.2f} h)", outcome.cost_s, outcome.cost_s / 3600.0));
}

void check_budget(const TuneFlags& flags) {
  if (flags.budget && *flags.budget < 1) throw usage_error(fmt::format("--budget {} must be at least 1", *flags.budget));
}

std::size_t budget_of(const TuneFlags& flags) {
  return flags.budget ? static_cast<std::size_t>(*flags.budget) : tune::tuner_info(flags.algorithm).default_budget;
}

void tune_on_twin(const TuneFlags& flags, const GlobalOptions& global) {
  flags.real.reject_on_twin("sim");
  reject_for_platform(flags.allow_gpu_control, "--allow-gpu-control", "sim");
  reject_for_platform(flags.out.has_value(), "--out", "sim (a search on the twin takes seconds: rerun it)");
  if (!flags.model) throw usage_error("--model is required on the simulated GPU (see 'gpucap list models')");
  const auto catalog = sim::Catalog::load(resolve_data_dir(global));
  const auto gpu_id = flags.gpu.value_or("p40");
  const auto& gpu = catalog.gpu(gpu_id);
  (void)inference_model(catalog, *flags.model);
  runtime::check_cap_schedule(CapSchedule::constant(flags.power_cap_w), gpu);
  check_budget(flags);
  const auto space = search_space(flags, gpu);
  runtime::TrialOptions options;
  options.measure_s = flags.measure_s;
  options.sample_hz = flags.sample_hz;
  options.seed = parse_seed(flags.seed);
  const runtime::SimTrialRunner runner(catalog, gpu_id, *flags.model, options);
  // Every configuration is checked before the first measurement.
  for (std::size_t i = 0; i < space.size(); ++i) runner.check(space.point(i));
  auto tuner = tune::make_tuner(flags.algorithm, space, flags.power_cap_w, options.seed);
  const auto budget = budget_of(flags);
  const bool text_progress = !flags.json && tune::tuner_info(flags.algorithm).adaptive;
  // Wide enough for "batch=256 sm=1531MHz" (+ " mem=9501MHz"), so the columns line up.
  const std::size_t point_width = space.memory_clocks_mhz.empty() ? 20 : 32;
  if (!flags.json) print_header(flags, gpu, space, budget);
  const auto outcome = runtime::run_tuner(
      *tuner, [&runner](const tune::ConfigPoint& p) { return runner.measure(p); }, flags.power_cap_w, budget,
      [&](const std::vector<tune::Trial>& trials, const std::optional<tune::Trial>& best) {
        if (text_progress) print_trial(trials, best, flags.power_cap_w, point_width);
      });
  if (flags.json) {
    std::cout << result_json(flags, gpu.id, catalog.model(*flags.model).id, space, budget, outcome).dump(2) << "\n";
  } else {
    print_summary(space, outcome);
  }
}

// --- a real GPU ---

// The batch sizes a capfit profile measures (runtime::default_profile_space): about √2 apart.
const std::vector<int> kRealBatchSizes = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};

bool supported_clock(const std::vector<double>& clocks, double mhz) {
  return std::any_of(clocks.begin(), clocks.end(), [mhz](double c) { return std::abs(c - mhz) < 1e-6; });
}

// With GPU control: the given clocks (each one the GPU supports) or ten spread over its range.
// Without: one SM clock, the GPU's highest, as the label of "whatever the GPU chooses".
tune::SearchSpace real_search_space(const TuneFlags& flags, const device::NvmlDevice& gpu, const control::PlatformLimits& limits) {
  tune::SearchSpace space;
  space.batch_sizes = flags.batch_sizes ? control::parse_batch_sizes(*flags.batch_sizes) : kRealBatchSizes;
  const auto& info = gpu.info();
  if (!flags.allow_gpu_control) {
    if (info.sm_clocks_mhz.empty()) throw Error(ErrorCode::unsupported, fmt::format("{} reports no SM clocks", info.name));
    space.sm_clocks_mhz = {*std::max_element(info.sm_clocks_mhz.begin(), info.sm_clocks_mhz.end())};
  } else {
    space.sm_clocks_mhz = flags.clock_levels ? control::parse_clock_levels(*flags.clock_levels) : limits.dvfs_levels_mhz;
    for (const double mhz : space.sm_clocks_mhz) {
      if (!supported_clock(info.sm_clocks_mhz, mhz)) {
        throw usage_error(fmt::format("{} does not support the SM clock {:g} MHz (see 'gpucap devices')", info.name, mhz));
      }
    }
    if (flags.memory_clocks) {
      space.memory_clocks_mhz = control::parse_clock_levels(*flags.memory_clocks);
      for (const double mhz : space.memory_clocks_mhz) {
        if (!supported_clock(info.memory_clocks_mhz, mhz)) {
          throw usage_error(fmt::format("{} does not support the memory clock {:g} MHz", info.name, mhz));
        }
      }
    }
  }
  space.validate();
  return space;
}

EngineFlags engine_flags(const TuneFlags& flags) {
  return flags.real.engine(flags.seed, flags.precision);
}

void check_real_flags(const TuneFlags& flags) {
  reject_for_platform(flags.gpu.has_value(), "--gpu", "nvml (use --device N)");
  reject_for_platform(flags.model.has_value(), "--model", "nvml (use --model-file FILE.pt)");
  if (!flags.real.model_file) throw usage_error("--model-file FILE.pt is required on a real GPU (scripts/export_models.py)");
  if (!flags.allow_gpu_control && (flags.clock_levels || flags.memory_clocks)) {
    throw usage_error("--clock-levels and --memory-clocks lock clocks: they need --allow-gpu-control (without it, "
                      "tune searches batch sizes at the GPU's own clocks)");
  }
  if (!(flags.power_cap_w > 0.0)) throw usage_error(fmt::format("--power-cap {:g} must be > 0 W", flags.power_cap_w));
  check_budget(flags);
  runtime::check_sample_hz(flags.sample_hz);
  (void)torch_engine_options(engine_flags(flags));  // checks precision and seed
}

void print_real_trial(const std::vector<tune::Trial>& trials, const std::optional<tune::Trial>& best, double cap_w,
                      const char* source) {
  const auto& t = trials.back();
  fmt::print(stderr, "  eval {:>3}  {:<32} {:>9.2f} img/s {:>7.2f} W  {:<8}  best {}  [{}]\n", trials.size(),
             describe(t.point), t.result.throughput_img_s, t.result.max_power_w,
             tune::feasible(t.result, cap_w) ? "feasible" : "over cap",
             best ? fmt::format("{:.2f} img/s", best->result.throughput_img_s) : std::string("none yet"), source);
}

void tune_on_nvml(const TuneFlags& flags) {
  check_real_flags(flags);
  const auto options = flags.real.platform(flags.allow_gpu_control, flags.sample_hz);
  const auto engine = engine_flags(flags);
  runtime::NvmlPlatform platform(options, [&engine](std::function<double()> now_s) {
    return engine::load_torch_engine(torch_engine_options(engine), std::move(now_s));
  });
  const auto& info = platform.gpu().info();
  CapSchedule::constant(flags.power_cap_w)
      .check_range(0.0, info.power_limit_max_w, fmt::format("what the {} can draw (up to its highest power limit)", info.name));
  const auto space = real_search_space(flags, platform.gpu(), platform.controller_limits());
  const runtime::PlatformTrialOptions trial_options{flags.warmup_s, flags.measure_s, flags.allow_gpu_control, &stop_requested};
  const auto setup = trial_setup(engine, platform.gpu(), trial_options, flags.sample_hz);
  std::optional<runtime::TrialFile> file;
  if (flags.out) file.emplace(*flags.out, setup);
  const StopOnSignals stop_on_signals;
  runtime::PlatformTrialRunner runner(platform, trial_options);
  auto tuner = tune::make_tuner(flags.algorithm, space, flags.power_cap_w, parse_seed(flags.seed));
  const auto budget = budget_of(flags);

  fmt::print(stderr, "gpucap tune ({}) on a REAL {} (GPU {}, {}), {}\n", flags.algorithm, info.name, info.index, info.uuid,
             platform.engine().name());
  fmt::print(stderr, "  cap {:g} W, {}, warm-up {:g} s + {:g} s per measurement{}\n", flags.power_cap_w, space_text(space),
             flags.warmup_s, flags.measure_s, budget > 0 ? fmt::format(", budget {}", budget) : std::string());
  if (!flags.allow_gpu_control) {
    fmt::print(stderr, "  batch size only, at the GPU's own clocks (no --allow-gpu-control); sm={:g}MHz is a label\n",
               space.sm_clocks_mhz.front());
  }
  if (file && file->size() > 0) fmt::print(stderr, "  {} trials already measured in {}\n", file->size(), file->path());
  const char* source = "measured";
  const auto outcome = runtime::run_tuner(
      *tuner,
      runtime::cached_measure(runner, file ? &*file : nullptr,
                              [&source](const tune::ConfigPoint&, const tune::TrialResult&, bool measured_now) {
                                source = measured_now ? "measured" : "from --out";
                              }),
      flags.power_cap_w, budget,
      [&](const std::vector<tune::Trial>& trials, const std::optional<tune::Trial>& best) {
        print_real_trial(trials, best, flags.power_cap_w, source);
      });
  if (flags.json) {
    auto out = result_json(flags, info.name, *flags.real.model_file, space, budget, outcome);
    out.update(nlohmann::json{{"platform", "nvml"}, {"uuid", info.uuid}, {"clocks_locked", flags.allow_gpu_control},
                              {"warmup_s", flags.warmup_s}, {"engine", platform.engine().name()},
                              {"setup", setup}});  // what `serve --profile` checks the profile against
    std::cout << out.dump(2) << "\n";
  } else {
    fmt::print("gpucap tune ({}) on a REAL {} ({})\n", flags.algorithm, info.name, *flags.real.model_file);
    print_summary(space, outcome, "measured");
    if (file) fmt::print("  {:<22} {:>24}\n", "trials", file->path());
  }
}

}  // namespace

Command add_tune_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<TuneFlags>();
  auto* cmd = app.add_subcommand("tune", "Search offline for the best configuration under a power cap (simulated or real GPU)");
  cmd->add_option("--platform", flags->platform,
                  "sim: the GPU twin, virtual time; nvml: a real NVIDIA GPU (NVML + the LibTorch engine), every trial "
                  "measured")
      ->capture_default_str();
  cmd->add_option("--algorithm", flags->algorithm, "Search: oracle (exhaustive) or bobd (Bayesian optimisation)")
      ->required();
  cmd->add_option("--gpu", flags->gpu, "sim: GPU twin (see 'gpucap list gpus'; default p40)");
  cmd->add_option("--model", flags->model, "sim: model (see 'gpucap list models')");
  cmd->add_option("--power-cap", flags->power_cap_w, "Power cap in W: the best configuration's window max stays under it")
      ->required();
  cmd->add_option("--budget", flags->budget,
                  "Most configurations to measure (default: 50 for bobd, the whole space for oracle)");
  cmd->add_option("--measure-s", flags->measure_s, "Length of one fixed-configuration measurement in seconds")
      ->capture_default_str();
  cmd->add_option("--batch-sizes", flags->batch_sizes,
                  "Batch sizes to search, e.g. 1..256 or 1,2,4,8 (default: sim 1..256; nvml 1,2,3,4,6,8,12,...,192,256)");
  cmd->add_option("--clock-levels", flags->clock_levels,
                  "SM clocks to search in MHz (default: the GPU's DVFS ladder; nvml: ten of its clocks, needs "
                  "--allow-gpu-control)");
  cmd->add_option("--memory-clocks", flags->memory_clocks,
                  "Memory clocks to search in MHz (default: sim all the GPU's, if it has several; nvml the driver's)");
  cmd->add_option("--seed", flags->seed, "Seed of BOBD's initial design, and of the twin's noise (nvml: of the input)")
      ->capture_default_str();
  cmd->add_option("--sample-hz", flags->sample_hz, "Power sampling rate in Hz")->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the result and every trial as JSON (capfit --profile reads it)");
  cmd->add_option("--out", flags->out,
                  "nvml: keep every measured trial in this JSON file as it is measured; a search started again with "
                  "the same file and setup does not measure them again (capfit --profile reads it)")
      ->check(output_path());
  cmd->add_option("--warmup-s", flags->warmup_s, "nvml: seconds at each configuration before its measurement")
      ->capture_default_str();
  cmd->add_option("--precision", flags->precision, "nvml: fp32, fp16 (CUDA) or bf16 (default fp32)");
  cmd->add_flag("--allow-gpu-control", flags->allow_gpu_control,
                "nvml: lock each configuration's clocks (needs root; restored after each trial, and after a crash by "
                "the next gpucap start); without it only batch sizes are searched");

  flags->real.add_to(*cmd);

  return Command{cmd, [flags, &global, cmd] {
                   stop_requested.store(false);
                   if (flags->platform == "sim") {
                     // The real GPU's options with defaults: given on the twin, they are an error too.
                     reject_given_for_platform(
                         *cmd, {"--warmup-s", "--device", "--engine-device", "--input-size", "--nvml-lib", "--precision"},
                         "sim");
                     tune_on_twin(*flags, global);
                   } else if (flags->platform == "nvml") {
                     tune_on_nvml(*flags);
                   } else {
                     throw usage_error(fmt::format("--platform '{}' must be sim or nvml", flags->platform));
                   }
                 }};
}

}  // namespace gpucap::cli
