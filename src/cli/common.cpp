#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/atomic_file.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

#ifndef GPUCAP_DEFAULT_DATA_DIR
#error "GPUCAP_DEFAULT_DATA_DIR must be defined by the build"
#endif

namespace gpucap::cli {

namespace {

// The data folder and where it was named, so that a missing one is reported as the user gave it.
std::string existing_data_dir(const std::string& dir, const char* named_by) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw usage_error(fmt::format("{} '{}': no such folder (it should hold gpus/, models/ and datasets/)", named_by, dir));
  }
  return dir;
}

}  // namespace

std::string resolve_data_dir(const GlobalOptions& global) {
  if (!global.data_dir.empty()) return existing_data_dir(global.data_dir, "--data-dir");
  if (const char* env = std::getenv("GPUCAP_DATA_DIR"); env != nullptr && *env != '\0') {
    return existing_data_dir(env, "$GPUCAP_DATA_DIR");
  }
  return existing_data_dir(GPUCAP_DEFAULT_DATA_DIR, "the built-in data folder");
}

std::string resolve_pctodl_params_dir(const std::optional<std::string>& given) {
  if (given) return *given;
  if (const char* env = std::getenv("GPUCAP_PCTODL_PARAMS"); env != nullptr && *env != '\0') return env;
  return (std::filesystem::path(resolve_shared_dir()) / "pctodl").string();
}

std::string resolve_shared_dir() {
  if (const char* env = std::getenv("GPUCAP_SHARED_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return GPUCAP_DEFAULT_SHARED_DIR;
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](const std::string& text) {
        const auto value = parse_double(text);
        return value && *value > 0.0 ? std::string() : fmt::format("must be a positive number, not '{}'", text);
      },
      "POSITIVE");
}

CLI::Validator output_path() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        if (text.empty()) return "must name a path, not ''";
        if (text == "-") return "'-' is not standard output here: give a path";
        return {};
      },
      "PATH");
}

const sim::ModelSpec& inference_model(const sim::Catalog& catalog, const std::string& id) {
  const auto& model = catalog.model(id);
  if (model.training_only()) {
    throw usage_error(fmt::format("{} is a training workload of Zeus's traces: the twin models its training step only, "
                                  "not inference (see 'gpucap list models')",
                                  model.id));
  }
  return model;
}

void check_can_write(const std::string& path) {
  // A pipe, a terminal or a device is written straight through when the time comes: opening it
  // now could end a reader's input (a FIFO's reader sees EOF when the probe closes it).
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) return;
  // A writer that is never committed removes its temporary file: only the folder is tried.
  const AtomicFileWriter probe(path, AtomicFileWriter::Durability::flush);
}

void check_power_cap_flag(const std::optional<double>& cap_w) {
  if (cap_w && !(std::isfinite(*cap_w) && *cap_w > 0.0)) {
    throw usage_error(fmt::format("--power-cap {:g}: must be a positive number of watts", *cap_w));
  }
}

CapSchedule schedule_from_flags(const std::string& schedule, const std::optional<double>& power_cap_w) {
  check_power_cap_flag(power_cap_w);
  auto parsed = CapSchedule::parse(schedule, power_cap_w ? &*power_cap_w : nullptr);
  if (power_cap_w && parsed.steps().front().cap_w != *power_cap_w) {
    throw usage_error("--power-cap only sets the cap before the first step of --cap-schedule, and this schedule "
                      "starts at 0 s; drop one of them");
  }
  return parsed;
}

std::uint64_t parse_seed(const std::string& text) {
  const auto value = parse_integer(text);
  if (!value || *value < 0) throw usage_error(fmt::format("--seed '{}' must be a whole number from 0 to 2^63-1", text));
  return static_cast<std::uint64_t>(*value);
}

void ControllerFlags::add_to(CLI::App& app) {
  app.add_option("--alpha", alpha_, "Lower edge of the power band as a fraction of the cap (seeds: 0.8)");
  app.add_option("--window", window_,
                 "Decision window: seconds ('3', '3s') or batches ('10b') (seeds: 3s; batchsizer 10b)");
  app.add_option("--batch-sizes", batch_sizes_,
                 "Batch size set: '1,2,4,8' or a range '1..255' (seeds: batchsizer 1,2,4..256; batchdvfs 1..255; "
                 "clipper 1..256)");
  app.add_option("--clock-levels", clock_levels_,
                 "SM clock levels in MHz for batchdvfs/dvfs, e.g. '544,632,734' (default: the GPU's DVFS ladder)");
  app.add_option("--start-batch", start_batch_, "First batch size (must be in the set; seeds: 1)");
  app.add_option("--start-clock", start_clock_mhz_, "First SM clock level in MHz (seeds: the 6th of 10 levels)");
  app.add_option("--batch", fixed_batch_, "Fixed batch size for dvfs and powercap (seeds: 256)");
  app.add_option("--slo-ms", latency_slo_ms_, "Batch latency SLO in ms for morak (default: none)");
  app.add_option("--profile", profile_path_,
                 "capfit: profile of the model on this GPU, the JSON of 'gpucap tune --json' or --out (default: "
                 "measured before the run, on the twin or the real GPU); one measured for another GPU, model or "
                 "engine setup is refused");
  app.add_flag("--shadow", shadow_,
               "pctodl: run PctoDL's shadow optimizer (grey-box BO of shares and batches every 3 iterations; off as in "
               "upstream's benchmarks)");
}

control::ControllerOptions ControllerFlags::options() const {
  control::ControllerOptions options;
  options.alpha = alpha_;
  if (window_) options.window = control::DecisionPeriod::parse(*window_);
  if (batch_sizes_) options.batch_sizes = control::parse_batch_sizes(*batch_sizes_);
  if (clock_levels_) options.clock_levels_mhz = control::parse_clock_levels(*clock_levels_);
  options.start_batch = start_batch_;
  options.start_clock_mhz = start_clock_mhz_;
  options.fixed_batch = fixed_batch_;
  options.latency_slo_ms = latency_slo_ms_;
  options.shadow = shadow_;
  if (profile_path_) {
    options.profile = std::make_shared<const predict::ProfileModel>(predict::load_profile_json(*profile_path_));
  }
  return options;
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

std::atomic<bool> stop_requested{false};

extern "C" void request_stop(int /*signal*/) { stop_requested.store(true); }

StopOnSignals::StopOnSignals() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

StopOnSignals::~StopOnSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

nlohmann::json trial_setup(const EngineFlags& engine, const device::NvmlDevice& gpu,
                           const runtime::PlatformTrialOptions& trials, double sample_hz) {
  return {{"gpu", gpu.info().name},
          {"uuid", gpu.info().uuid},
          {"model_file", std::filesystem::absolute(engine.model_file).lexically_normal().string()},
          {"engine_device", engine.engine_device},
          {"precision", engine.precision.value_or("fp32")},
          {"input_size", engine.input_size},
          {"images_dir", engine.images_dir ? nlohmann::json(*engine.images_dir) : nlohmann::json()},
          {"cuda_graphs", engine.cuda_graphs},
          {"seed", engine.seed},
          {"warmup_s", trials.warmup_s},
          {"measure_s", trials.measure_s},
          {"sample_hz", sample_hz},
          {"clocks_locked", trials.lock_clocks}};
}

engine::TorchEngineOptions torch_engine_options(const EngineFlags& flags) {
  engine::TorchEngineOptions options;
  options.precision = engine::parse_torch_precision(flags.precision.value_or("fp32"));
  options.cuda_graphs = flags.cuda_graphs;
  options.model_file = flags.model_file;
  options.device = flags.engine_device;
  options.input_size = flags.input_size;
  options.seed = parse_seed(flags.seed);
  options.images_dir = flags.images_dir.value_or("");
  return options;
}

void RealGpuFlags::add_to(CLI::App& app) {
  defaulted_.push_back(app.add_option("--device", device_index, "nvml: GPU index (see 'gpucap devices')")->capture_default_str());
  defaulted_.push_back(
      app.add_option("--nvml-lib", nvml_library, "nvml: NVML library (default: $GPUCAP_NVML_LIB, else libnvidia-ml.so.1)"));
  app.add_option("--power-settle-s", power_settle_s,
                 "nvml: seconds the power reading takes to show a change (default 1: NVML's 1-s average)");
  app.add_option("--model-file", model_file, "nvml: TorchScript model (scripts/export_models.py)");
  defaulted_.push_back(
      app.add_option("--engine-device", engine_device, "nvml: where the engine runs: cuda, cuda:N or cpu")->capture_default_str());
  defaulted_.push_back(app.add_option("--input-size", input_size, "nvml: height = width of the input images")->capture_default_str());
  app.add_option("--images-dir", images_dir,
                 "nvml: a folder of JPEG images as the input (decoded with libjpeg-turbo and resized before the run; "
                 "batches cycle through the first 256); default: synthetic images");
  app.add_flag("--cuda-graphs", cuda_graphs,
               "nvml: capture each batch size's forward pass once as a CUDA graph and replay it (CUDA LibTorch only)");
}

void RealGpuFlags::reject_on_twin(std::string_view platform) const {
  reject_for_platform(model_file.has_value(), "--model-file", fmt::format("{} (use --model)", platform));
  reject_for_platform(power_settle_s.has_value(), "--power-settle-s", platform);
  reject_for_platform(images_dir.has_value(), "--images-dir", platform);
  reject_for_platform(cuda_graphs, "--cuda-graphs", platform);
  for (const auto* option : defaulted_) reject_for_platform(option->count() > 0, option->get_name(), platform);
}

void RealGpuFlags::reject_for_requests() const {
  if (images_dir) throw usage_error("--images-dir does not apply here: the model runs on the requests' own data");
  if (cuda_graphs) throw usage_error("--cuda-graphs does not apply here: the requests' batches run as they come, not as graphs");
}

EngineFlags RealGpuFlags::engine(const std::string& seed, const std::optional<std::string>& precision) const {
  return EngineFlags{*model_file, engine_device, input_size, seed, precision, images_dir, cuda_graphs};
}

ProfileCheck twin_profile_check(const std::string& gpu_id, const std::string& model_id) {
  ProfileCheck check;
  check.here.simulated = true;
  check.here.gpu = gpu_id;
  check.here.model = model_id;
  check.retake = fmt::format("gpucap tune --gpu {} --model {} --algorithm oracle --power-cap W --json", gpu_id, model_id);
  return check;
}

ProfileCheck real_profile_check(const RealGpuFlags& real, const EngineFlags& engine, bool allow_gpu_control) {
  ProfileCheck check;
  check.here.simulated = false;
  check.here.model = std::filesystem::path(engine.model_file).stem().string();
  check.here.precision = engine.precision.value_or("fp32");
  check.here.input_size = engine.input_size;
  check.here.engine_device = engine.engine_device;
  check.retake = fmt::format("gpucap tune --platform nvml{} --model-file {} --precision {} --input-size {} --engine-device {}{} "
                             "--algorithm oracle --power-cap W --json",
                             real.device_index != 0 ? fmt::format(" --device {}", real.device_index) : "", engine.model_file,
                             *check.here.precision, engine.input_size, engine.engine_device,
                             allow_gpu_control ? " --allow-gpu-control" : "");
  return check;
}

void check_profile_origin(const std::string& path, const predict::ProfileOrigin& measured, const ProfileCheck& check) {
  if (const auto mismatch = predict::profile_mismatch(measured, check.here)) {
    throw usage_error(fmt::format("--profile {}: {}; measure this one's with '{}'", path, *mismatch, check.retake));
  }
}

runtime::NvmlPlatformOptions RealGpuFlags::platform(bool allow_gpu_control, double sample_hz) const {
  runtime::NvmlPlatformOptions options;
  options.nvml_library = nvml_library;
  options.device_index = device_index;
  options.allow_gpu_control = allow_gpu_control;
  options.sample_hz = sample_hz;
  if (power_settle_s) options.power_settle_s = *power_settle_s;
  return options;
}

runtime::MpsPoolOptions mps_pool_options(const EngineFlags& worker, const std::string& gpu_uuid) {
  runtime::MpsPoolOptions pool;
  if (const char* custom = std::getenv("GPUCAP_MPS_WORKER"); custom != nullptr && *custom != '\0') {
    pool.worker_command = {custom};
  } else {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw Error(ErrorCode::io, "cannot find the gpucap binary to start MPS workers (/proc/self/exe)");
    std::vector<std::string> args = {"--model-file", worker.model_file, "--engine-device", worker.engine_device,
                                     "--input-size", std::to_string(worker.input_size), "--seed", worker.seed};
    for (const auto& [flag, value] : {std::pair{"--precision", worker.precision}, std::pair{"--images-dir", worker.images_dir}}) {
      if (value) {
        args.emplace_back(flag);
        args.push_back(*value);
      }
    }
    if (worker.cuda_graphs) args.emplace_back("--cuda-graphs");
    pool.worker_command = runtime::mps_worker_command(self.string(), args);
  }
  pool.worker_env = {{"CUDA_VISIBLE_DEVICES", gpu_uuid}};
  pool.daemon = runtime::MpsDaemonOptions{};
  return pool;
}

void reject_for_platform(bool given, std::string_view option, std::string_view platform) {
  if (given) throw usage_error(fmt::format("{} does not apply to --platform {}", option, platform));
}

void reject_given_for_platform(const CLI::App& command, std::initializer_list<const char*> options,
                               std::string_view platform) {
  for (const char* option : options) reject_for_platform(command.count(option) > 0, option, platform);
}

std::string default_zeus_trace(const std::string& file) {
  return (std::filesystem::path(resolve_shared_dir()) / "zeus" / "nsdi23" / file).string();
}

std::optional<double> parse_beta(const std::string& text) {
  if (to_lower(trim(text)) == "none") return std::nullopt;
  const auto value = parse_double(text);
  if (!value || !(*value > 0.0)) throw usage_error(fmt::format("--beta must be a positive number or 'none', not '{}'", text));
  return *value;
}

}  // namespace gpucap::cli
