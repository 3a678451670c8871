#pragma once
// The gpucap command line: one file per subcommand (src/cli/*_command.cpp), each a thin layer
// over the library. Errors are thrown as gpucap::Error and mapped to exit codes in main().

#include <CLI/CLI.hpp>
#include <signal.h>

#include <atomic>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/control/registry.hpp"
#include "gpucap/engine/torch_plugin.hpp"
#include "gpucap/predict/profile_model.hpp"
#include "gpucap/device/nvml_device.hpp"
#include "gpucap/runtime/mps.hpp"
#include "gpucap/runtime/nvml_platform.hpp"
#include "gpucap/runtime/platform_tuning.hpp"

namespace gpucap::cli {

struct GlobalOptions {
  std::string data_dir;  // --data-dir, else $GPUCAP_DATA_DIR, else the build's default
};

// A registered subcommand and what to do when it was chosen.
struct Command {
  Command(CLI::App* app_, std::function<void()> run_, std::shared_ptr<const int> exit_status_ = nullptr)
      : app(app_), run(std::move(run_)), exit_status(std::move(exit_status_)) {}

  CLI::App* app = nullptr;
  std::function<void()> run;
  // Set by a command that hands on another program's exit status (monitor): main exits with it.
  std::shared_ptr<const int> exit_status;
};

Command add_run_command(CLI::App& app, const GlobalOptions& global);
Command add_replay_command(CLI::App& app, const GlobalOptions& global);
Command add_list_command(CLI::App& app, const GlobalOptions& global);
Command add_bench_command(CLI::App& app, const GlobalOptions& global);
Command add_calibrate_command(CLI::App& app, const GlobalOptions& global);
Command add_fidelity_command(CLI::App& app, const GlobalOptions& global);
Command add_tune_command(CLI::App& app, const GlobalOptions& global);
Command add_devices_command(CLI::App& app, const GlobalOptions& global);
Command add_predict_command(CLI::App& app, const GlobalOptions& global);
Command add_partition_command(CLI::App& app, const GlobalOptions& global);
Command add_profile_command(CLI::App& app, const GlobalOptions& global);
Command add_fit_command(CLI::App& app, const GlobalOptions& global);
Command add_mps_worker_command(CLI::App& app, const GlobalOptions& global);
// gpucap share: several jobs on one GPU under a policy (SwitchFlow and its baselines).
Command add_share_command(CLI::App& app, const GlobalOptions& global);
// gpucap monitor: a command's GPU time and energy, or a Prometheus exporter (dcgm-exporter's names).
Command add_monitor_command(CLI::App& app, const GlobalOptions& global);
// gpucap serve: an inference server (KServe v2) under a power cap set at any moment.
Command add_serve_command(CLI::App& app, const GlobalOptions& global);
// gpucap load: a load generator for any KServe v2 server (open or closed loop; measured over HTTP).
Command add_load_command(CLI::App& app, const GlobalOptions& global);
// gpucap bso: Zeus's batch-size optimizer for recurring training (serve, simulate, bench).
Command add_bso_command(CLI::App& app, const GlobalOptions& global);
// gpucap cluster: one power budget shared by many nodes; its subcommands are in src/cli/cluster_commands.hpp.
Command add_cluster_command(CLI::App& app, const GlobalOptions& global);
// Its subcommands, one file each; `bso` is the parent app.
Command add_bso_serve_command(CLI::App& bso, const GlobalOptions& global);
Command add_bso_simulate_command(CLI::App& bso, const GlobalOptions& global);
Command add_bso_bench_command(CLI::App& bso, const GlobalOptions& global);
// Zeus's NSDI'23 trace file `file` in the shared data (zeus/nsdi23/).
[[nodiscard]] std::string default_zeus_trace(const std::string& file);
// --beta: a positive number, or "none" (no early stopping); Error(usage) otherwise.
[[nodiscard]] std::optional<double> parse_beta(const std::string& text);

[[nodiscard]] std::string resolve_data_dir(const GlobalOptions& global);

// PctoDL's parameter folder: `given` (--params), else $GPUCAP_PCTODL_PARAMS, else the shared
// data's pctodl/ folder.
[[nodiscard]] std::string resolve_pctodl_params_dir(const std::optional<std::string>& given);

// The NVML library: $GPUCAP_NVML_LIB, else libnvidia-ml.so.1.
[[nodiscard]] std::string default_nvml_library();
// If the restore journal lists GPU settings (a gpucap that did not exit normally left them
// changed), puts them back through NVML and says so on stderr. Never throws: a failure is
// reported and the journal kept for the next try.
void recover_gpu_settings(const std::string& nvml_library);

// Set by SIGINT/SIGTERM while a StopOnSignals lives: a run ends at its next batch boundary (a
// search at the end of its trial in flight, which is dropped) and restores the GPU.
extern std::atomic<bool> stop_requested;

// For the life of the object, SIGINT and SIGTERM set stop_requested instead of killing gpucap.
class StopOnSignals {
 public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// SIGINT and SIGTERM, for a server that blocks them in every thread and waits for them in one.
[[nodiscard]] sigset_t stop_signal_set();

// Error(usage) "OPTION does not apply to --platform PLATFORM" if the option was given.
void reject_for_platform(bool given, std::string_view option, std::string_view platform);
// The same for each of `options` given on `command`'s line (its count: options with a default
// included).
void reject_given_for_platform(const CLI::App& command, std::initializer_list<const char*> options,
                               std::string_view platform);

// What the LibTorch engine of a real GPU needs to load and feed the model, in gpucap itself
// (`run`, `tune`) or in an MPS worker (`gpucap mps-worker`'s flags).
struct EngineFlags {
  std::string model_file;
  std::string engine_device = "cuda";
  int input_size = 224;
  std::string seed = "1";
  std::optional<std::string> precision;
  std::optional<std::string> images_dir;
  bool cuda_graphs = false;
};
// The options of a real GPU that `run` and `tune` share: the device and NVML, and the engine's model
// and input (--device, --nvml-lib, --power-settle-s, --model-file, --engine-device, --input-size,
// --images-dir, --cuda-graphs).
struct RealGpuFlags {
  unsigned device_index = 0;
  std::string nvml_library = default_nvml_library();
  std::optional<double> power_settle_s;
  std::optional<std::string> model_file;
  std::string engine_device = "cuda";
  int input_size = 224;
  std::optional<std::string> images_dir;
  bool cuda_graphs = false;

  void add_to(CLI::App& app);
  // Error(usage) naming the first of them given on the twin (`platform`: how the command names
  // it), which would otherwise go unused.
  void reject_on_twin(std::string_view platform) const;
  // Error(usage) for --images-dir and --cuda-graphs where the model runs on the requests' own
  // data (serve), which neither feeds.
  void reject_for_requests() const;
  // The engine's flags (model_file must be set) with the command's --seed and --precision.
  [[nodiscard]] EngineFlags engine(const std::string& seed, const std::optional<std::string>& precision) const;
  [[nodiscard]] runtime::NvmlPlatformOptions platform(bool allow_gpu_control, double sample_hz) const;

 private:
  // The options with a default (--device, --nvml-lib, --engine-device, --input-size): whether they
  // were given is their count.
  std::vector<const CLI::Option*> defaulted_;
};

// The worker pool of a real GPU: `gpucap mps-worker` with those flags (or $GPUCAP_MPS_WORKER,
// another program that speaks the worker protocol), only the GPU `gpu_uuid` visible to the
// workers, and a private MPS daemon of its own.
[[nodiscard]] runtime::MpsPoolOptions mps_pool_options(const EngineFlags& worker, const std::string& gpu_uuid);
// What the trials of a real GPU depend on (runtime::TrialFile's setup): the GPU, the engine and
// its input, the trial lengths, the sampling rate and whether clocks were locked.
[[nodiscard]] nlohmann::json trial_setup(const EngineFlags& engine, const device::NvmlDevice& gpu,
                                         const runtime::PlatformTrialOptions& trials, double sample_hz);
// The engine's options; Error(usage) for a precision other than fp32, fp16 or bf16, or a bad seed.
[[nodiscard]] engine::TorchEngineOptions torch_engine_options(const EngineFlags& flags);
// The shared reference measurements: $GPUCAP_SHARED_DATA_DIR, else the build's ../shared/data.
[[nodiscard]] std::string resolve_shared_dir();

// A CLI11 check for a positive, finite number: "must be a positive number, not '-1'" (CLI11's own
// PositiveNumber prints the range up to the largest double, 300 digits).
[[nodiscard]] CLI::Validator positive_number();
// A CLI11 check for a path gpucap writes: not empty, and not '-', which other tools read as
// standard output but gpucap would create as a file or folder named '-' (a file path such as
// /dev/stdout is written through).
[[nodiscard]] CLI::Validator output_path();

// The catalog's model `id`, to run inference on the twin; Error(usage) for a training workload of
// Zeus's traces (the twin models their training step only).
[[nodiscard]] const sim::ModelSpec& inference_model(const sim::Catalog& catalog, const std::string& id);

// Proves that `path` can be written (its folder exists and takes a new file) before a long
// computation whose result goes there, leaving nothing behind; Error(io) naming it otherwise.
void check_can_write(const std::string& path);

// --power-cap, if given: a positive, finite number of watts; Error(usage) naming the flag otherwise.
void check_power_cap_flag(const std::optional<double>& cap_w);
// --cap-schedule with --power-cap, if given, for the time before its first step; Error(usage) for a
// bad schedule or cap, and for a --power-cap that would go unused (the schedule starts at 0 s
// with another cap).
[[nodiscard]] CapSchedule schedule_from_flags(const std::string& schedule, const std::optional<double>& power_cap_w);

// --seed: a whole number from 0 to 2^63-1; Error(usage) otherwise.
[[nodiscard]] std::uint64_t parse_seed(const std::string& text);

// --profile (serve, run): where a profile must have been measured to plan this command's job
// (`here`), and `retake`, the command that measures that one.
struct ProfileCheck {
  predict::ProfileOrigin here;
  std::string retake;
};
// The twin's `gpu_id` running `model_id`.
[[nodiscard]] ProfileCheck twin_profile_check(const std::string& gpu_id, const std::string& model_id);
// A real GPU's engine as `engine` sets it up (the GPU's name is added once NVML gives it).
[[nodiscard]] ProfileCheck real_profile_check(const RealGpuFlags& real, const EngineFlags& engine, bool allow_gpu_control);
// Error(usage), one line naming `path`, the first difference and check.retake, when the file says
// it was measured elsewhere or otherwise than check.here.
void check_profile_origin(const std::string& path, const predict::ProfileOrigin& measured, const ProfileCheck& check);

// The controller options shared by `run` (and later `bench`): --alpha, --window,
// --batch-sizes, --clock-levels, --start-batch, --start-clock, --batch, --slo-ms, --profile.
class ControllerFlags {
 public:
  void add_to(CLI::App& app);
  [[nodiscard]] control::ControllerOptions options() const;
  // --profile's file, if given.
  [[nodiscard]] const std::optional<std::string>& profile_path() const { return profile_path_; }

 private:
  std::optional<double> alpha_;
  std::optional<std::string> window_;
  std::optional<std::string> batch_sizes_;
  std::optional<std::string> clock_levels_;
  std::optional<int> start_batch_;
  std::optional<double> start_clock_mhz_;
  std::optional<int> fixed_batch_;
  std::optional<double> latency_slo_ms_;
  std::optional<std::string> profile_path_;
  bool shadow_ = false;
};

}  // namespace gpucap::cli
