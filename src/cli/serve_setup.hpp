#pragma once
// `gpucap serve`'s flags, and what they set up before serving: the GPU and the model (the twin or
// a real GPU through LibTorch), the batcher, the serving controller and the cap to start with.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpucap/cli/commands.hpp"
#include "gpucap/cluster/node_curves.hpp"
#include "gpucap/control/serving.hpp"
#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/monitor/gpu_exporter.hpp"
#include "gpucap/predict/profile_model.hpp"
#include "gpucap/runtime/platform.hpp"
#include "gpucap/serve/batcher.hpp"
#include "gpucap/service/inference_server.hpp"
#include "gpucap/sim/catalog.hpp"
#include "cluster_node.hpp"
#include "live_metrics.hpp"

namespace gpucap::cli {

inline constexpr const char* kServeListenDefault = "127.0.0.1:8000";

struct ServeFlags {
  std::string platform = "twin";
  std::optional<std::string> gpu;
  std::optional<std::string> model;
  std::optional<std::string> precision;
  std::string noop_shape = "16";
  RealGpuFlags real;
  bool allow_gpu_control = false;
  std::optional<std::string> profile_path;
  std::string listen = kServeListenDefault;
  std::optional<std::string> metrics;
  std::optional<std::string> admin;
  std::optional<std::string> admin_token_file;
  double slo_ms = 100.0;
  std::optional<double> power_cap_w;
  std::optional<std::string> cap_schedule;
  std::optional<std::string> cap_file;
  std::string algorithm = "capserve";
  std::string pace = "realtime";
  int max_batch_size = 64;
  double max_queue_delay_us = 0.0;
  std::vector<int> preferred_batch_sizes;
  int priority_levels = 0;
  std::size_t max_queue_size = 0;
  double queue_timeout_ms = 30'000.0;
  double batch_timeout_s = 60.0;
  double max_request_mib = 64.0;
  std::size_t threads = 128;
  std::string hostname_label = monitor::kHostnameLabel;
  std::string seed = "1";
  double sample_hz = 100.0;
  std::string warmup = "auto";  // nvml: auto (on with a CUDA engine), on or off
  bool json = false;
  ClusterNodeFlags cluster;
};

// The GPU, the model and how batches turn into answers.
struct Served {
  std::unique_ptr<runtime::Platform> platform;
  std::unique_ptr<service::InferenceBackend> backend;
  std::string gpu_id;     // catalogue id (twin) or NVML name
  std::string gpu_name;   // the board's name
  monitor::GpuIdentity identity;
  std::shared_ptr<const predict::ProfileModel> profile;
  double min_cap_w = 1.0;  // below it no controller can meet the cap
  std::optional<cluster::NodeCurve> capacity;  // with --cluster-etcd: what it can serve under each cap
  // --warmup: runs the model at every batch size (on the serving loop's GPU thread, before it
  // serves) and says what ran, for the banner; empty: no warm-up.
  std::function<std::string()> warm_up;
};

// The GPU and the model: the twin (--platform twin) or a real GPU with a TorchScript model.
[[nodiscard]] Served twin_served(const ServeFlags& f, const sim::Catalog& catalog);
[[nodiscard]] Served nvml_served(const ServeFlags& f);
// Triton's batcher settings from the flags; Error(usage) for one out of its range.
[[nodiscard]] serve::BatcherConfig batcher_config(const ServeFlags& f);
// --algorithm's controller. p99_window_s: the span of the p99 the serving loop shows it.
[[nodiscard]] std::unique_ptr<control::ServingController> make_serving_controller(const ServeFlags& f, const Served& served,
                                                                                   bool gpu_writes, double p99_window_s);
// --algorithm: capserve, static, or one of the registry's batch-level controllers; Error(usage)
// naming those for another (the MPS partitioners and bobd's offline search do not serve one model
// on one GPU's requests) or an unknown name.
void check_serve_algorithm(const std::string& algorithm);
// The cap at the start and its source: --cap-schedule, --power-cap, or `cap_file_text`, the
// content of --cap-file read at the start (Error(invalid_data) if it is not a cap). With
// --cap-file the file's cap is the one at the start: --power-cap beside it is refused, and so is a
// schedule that starts at 0 s with another cap (a later one steps in at its times, as always; the
// caller sets the file's cap at 0 s over the schedule, so its source reads "file").
[[nodiscard]] std::pair<CapSchedule, std::string> initial_cap(const ServeFlags& f,
                                                               const std::optional<std::string>& cap_file_text);

}  // namespace gpucap::cli
