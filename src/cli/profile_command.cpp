// gpucap profile: PctoDL's profiling matrix (runtime/mps_profile.hpp) on the simulated GPU or, with
// --platform nvml, on a real one through the MPS worker pool (runtime/mps_gpu_profile.hpp), written
// in PctoDL's profile CSV columns for `gpucap fit`.

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <unistd.h>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/device/nvml_device.hpp"
#include "gpucap/device/restore_journal.hpp"
#include "gpucap/runtime/mps_gpu_profile.hpp"
#include "gpucap/runtime/mps_profile.hpp"
#include "gpucap/runtime/sim_platform.hpp"

namespace gpucap::cli {

namespace {

struct ProfileFlags {
  std::string platform = "sim";
  std::optional<std::string> gpu;
  std::optional<std::string> model;
  std::string out;
  std::optional<double> memory_clock_mhz;  // default: the GPU's default memory clock
  bool sweeps = false;
  double measure_s = 7.0;
  double warmup_s = 2.0;
  std::optional<std::size_t> limit;
  std::string seed = "1";
  double sample_hz = 20.0;
  // nvml
  std::optional<std::string> model_file;
  unsigned device_index = 0;
  std::string nvml_library = default_nvml_library();
  bool allow_gpu_control = false;
  std::string engine_device = "cuda";
  std::optional<std::string> precision;
  int input_size = 224;
};

void report_progress(std::size_t done, std::size_t total) {
  if (isatty(fileno(stderr)) != 0) std::fprintf(stderr, "\r%zu/%zu%s", done, total, done == total ? "\n" : "");
}

// The first --limit configurations (a quick look), or all.
std::vector<runtime::ProfileConfig> limited(std::vector<runtime::ProfileConfig> configs, const ProfileFlags& flags) {
  if (flags.limit) {
    if (*flags.limit < 1) throw usage_error("--limit must be at least 1");
    if (*flags.limit < configs.size()) configs.resize(*flags.limit);
  }
  return configs;
}

void profile_on_twin(const ProfileFlags& flags, const GlobalOptions& global) {
  reject_for_platform(flags.model_file.has_value(), "--model-file", "sim (use --model)");
  reject_for_platform(flags.allow_gpu_control, "--allow-gpu-control", "sim");
  if (!flags.gpu || !flags.model) throw usage_error("--gpu and --model are required on the twin");
  const auto catalog = sim::Catalog::load(resolve_data_dir(global));
  const auto& gpu = catalog.gpu(*flags.gpu);
  const auto& model = inference_model(catalog, *flags.model);
  const double memory_mhz = flags.memory_clock_mhz.value_or(gpu.default_memory_clock_mhz);
  if (std::find(gpu.memory_clocks_mhz.begin(), gpu.memory_clocks_mhz.end(), memory_mhz) ==
      gpu.memory_clocks_mhz.end()) {
    throw usage_error(fmt::format("the {} has no memory clock {:g} MHz", gpu.name, memory_mhz));
  }
  runtime::TrialOptions options;
  options.measure_s = flags.measure_s;
  options.sample_hz = flags.sample_hz;
  options.seed = parse_seed(flags.seed);
  const runtime::SimTrialRunner runner(catalog, gpu.id, model.id, options);
  const auto configs = limited(runtime::pctodl_profile_configs(gpu.sm_clocks_mhz, memory_mhz, flags.sweeps), flags);
  std::string csv = runtime::profile_csv_header();
  for (std::size_t i = 0; i < configs.size(); ++i) {
    csv += runtime::profile_csv_row(model.id, runtime::measure_profile_row(runner, gpu, model, configs[i]));
    report_progress(i + 1, configs.size());
  }
  write_text_file(flags.out, csv);
  fmt::print("profiled {} configurations of {} on the {} (simulated, memory {:g} MHz): {}\n", configs.size(),
             model.id, gpu.name, memory_mhz, flags.out);
}

void profile_on_gpu(const ProfileFlags& flags) {
  reject_for_platform(flags.gpu.has_value(), "--gpu", "nvml (use --device N)");
  if (!flags.model_file) throw usage_error("--model-file FILE.pt is required on a real GPU (scripts/export_models.py)");
  if (flags.sweeps && !flags.allow_gpu_control) {
    throw usage_error("--sweeps locks the SM clock: it needs --allow-gpu-control (and root)");
  }
  if (flags.memory_clock_mhz && !flags.allow_gpu_control) {
    throw usage_error("--mem locks the memory clock: it needs --allow-gpu-control (and root)");
  }
  if (flags.precision && *flags.precision != "fp32" && *flags.precision != "fp16") {
    throw usage_error(fmt::format("--precision '{}' must be fp32 or fp16", *flags.precision));
  }
  const std::string model = flags.model.value_or(std::filesystem::path(*flags.model_file).stem().string());
  const device::NvmlLibrary nvml(flags.nvml_library);
  device::NvmlDevice gpu(nvml, flags.device_index, flags.allow_gpu_control);
  const auto& info = gpu.info();
  device::RestoreJournal journal(device::default_journal_path());
  std::unique_ptr<device::ControlSession> session;
  if (flags.allow_gpu_control) session = std::make_unique<device::ControlSession>(gpu, journal, info.uuid);
  const double memory_mhz = flags.memory_clock_mhz.value_or(gpu.read(device::Signal::memory_clock_mhz));
  const auto pool = mps_pool_options(
      EngineFlags{*flags.model_file, flags.engine_device, flags.input_size, flags.seed, flags.precision, {}},
      info.uuid);
  runtime::GpuProfileOptions options;
  options.round = runtime::MpsRunRequest{flags.warmup_s, flags.measure_s};
  options.sample_hz = flags.sample_hz;
  options.lock_memory_clock = flags.memory_clock_mhz.has_value();
  const auto configs = limited(runtime::pctodl_profile_configs(info.sm_clocks_mhz, memory_mhz, flags.sweeps), flags);
  runtime::GpuProfiler profiler(gpu, session.get(), pool, options);
  std::string csv = runtime::profile_csv_header();
  for (std::size_t i = 0; i < configs.size(); ++i) {
    auto config = configs[i];
    // Without control the clocks stay with the GPU: the target is what it runs at.
    if (!session) config.sm_clock_mhz = 0.0;
    csv += runtime::profile_csv_row(model, profiler.measure(config));
    report_progress(i + 1, configs.size());
  }
  profiler.stop();
  if (session) session->restore();
  write_text_file(flags.out, csv);
  fmt::print("profiled {} configurations of {} on {} (GPU {}, real hardware, memory {:g} MHz{}): {}\n",
             configs.size(), model, info.name, info.index, memory_mhz,
             session ? "" : ", clocks left to the GPU", flags.out);
}

}  // namespace

Command add_profile_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<ProfileFlags>();
  auto* cmd = app.add_subcommand(
      "profile", "PctoDL's MPS profiling matrix (shares × tenants × batch, frequency sweeps) on the simulated GPU or "
                 "a real one, as a profile CSV for 'gpucap fit'");
  cmd->add_option("--platform", flags->platform, "sim (the twin) or nvml (a real GPU, MPS workers)")
      ->capture_default_str();
  cmd->add_option("--gpu", flags->gpu, "sim: GPU of the twin (see 'gpucap list gpus')");
  cmd->add_option("--model", flags->model,
                  "sim: model (see 'gpucap list models'); nvml: its name in the CSV (default: the model file's name)");
  cmd->add_option("--out", flags->out, "CSV file to write (PctoDL's profile columns)")->required()->check(output_path());
  cmd->add_option("--mem", flags->memory_clock_mhz,
                  "Memory clock in MHz (sim default: the GPU's default; nvml: locks it, needs --allow-gpu-control)");
  cmd->add_flag("--sweeps", flags->sweeps,
                "Add the frequency sweeps (4×25 %, 2×50 %, 10×10 % at batches 8/16/32; nvml: needs --allow-gpu-control)");
  cmd->add_option("--measure-s", flags->measure_s, "Length of each measurement (upstream: 7 s)")->capture_default_str();
  cmd->add_option("--warmup-s", flags->warmup_s, "nvml: warm-up before each measurement (upstream: 2 s)")
      ->capture_default_str();
  cmd->add_option("--limit", flags->limit, "Profile only the first N configurations (a quick look)");
  cmd->add_option("--seed", flags->seed, "Seed of the twin's noise (nvml: of the synthetic images)")->capture_default_str();
  cmd->add_option("--sample-hz", flags->sample_hz, "Power sampling rate (upstream: every 50 ms)")->capture_default_str();
  cmd->add_option("--model-file", flags->model_file, "nvml: TorchScript model (scripts/export_models.py)");
  cmd->add_option("--device", flags->device_index, "nvml: GPU index (see 'gpucap devices')")->capture_default_str();
  cmd->add_option("--nvml-lib", flags->nvml_library, "nvml: NVML library (default: $GPUCAP_NVML_LIB, else "
                                                     "libnvidia-ml.so.1)");
  cmd->add_flag("--allow-gpu-control", flags->allow_gpu_control,
                "nvml: lock each configuration's SM clock (needs root; restored at exit, and after a crash by the next "
                "gpucap start)");
  cmd->add_option("--engine-device", flags->engine_device, "nvml: where the workers' engine runs: cuda, cuda:N or cpu")
      ->capture_default_str();
  cmd->add_option("--precision", flags->precision, "nvml: fp32 or fp16 (default fp32)");
  cmd->add_option("--input-size", flags->input_size, "nvml: height = width of the input images")->capture_default_str();
  return Command{cmd, [flags, &global, cmd] {
                   if (flags->platform == "sim") {
                     // The real GPU's options with defaults: given on the twin, they would go unused.
                     reject_given_for_platform(
                         *cmd, {"--warmup-s", "--device", "--engine-device", "--input-size", "--nvml-lib", "--precision"},
                         "sim");
                     profile_on_twin(*flags, global);
                   } else if (flags->platform == "nvml") {
                     profile_on_gpu(*flags);
                   } else {
                     throw usage_error(fmt::format("--platform '{}' must be sim or nvml", flags->platform));
                   }
                 }};
}

}  // namespace gpucap::cli
