#include "gpucap/sim/share_twin.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/sim/noise.hpp"
#include "gpucap/sched/stream_chain.hpp"

namespace gpucap::sim {

struct ShareTwin::Calibration {
  struct Gpu {
    std::map<std::string, double> train_img_s;   // BS 32
    // A BS-32 step's GPU time, where it is known apart from the step: the rest of the step is its
    // host stage (LibTorch's trainer draws its batch on the CPU), not the synthetic copy.
    std::map<std::string, double> train_gpu_s;
    std::map<std::string, double> infer_bs1_s;
    std::string relative_to;                     // figures missing here: that GPU's, / relative_speed
    double relative_speed = 1.0;
    // JPEG input (Fig. 3): host seconds per image of a step, and BS-128 inference GPU time.
    std::map<std::string, double> jpeg_train_host_s_per_image;
    std::map<std::string, double> jpeg_infer_host_s_per_image;
    std::map<std::string, double> infer_bs128_s;
  };
  double pipelines_at_once = 0.0;
  // Of a training step's non-GPU time in Fig. 3, the part that is its input pipeline (what one
  // shared pipeline saves, Fig. 8); the rest is the step's own host work and holds the device.
  double train_input_share = 1.0;
  std::map<std::string, Gpu> gpus;
  std::string cpu_relative_to;
  double cpu_slowdown = 1.0;
  double backward_factor = 2.0;
  double kernel_spread_sigma = 1.0;
  double step_jitter = 0.0;
  // Free sharing (docs/simulator.md): the stream's launch queue, a training op's host dispatch,
  // and how an inference splits its time between the GPU (its FLOPs at infer_flop_rate, at most
  // infer_max_gpu_share of it) and the host's per-op dispatch (the rest).
  int queue_depth = 0;
  double train_launch_s = 0.0;
  double infer_flop_rate = 1.0;
  double infer_max_gpu_share = 1.0;
  int nmt_decode_steps = 1;
  double session_overhead_s = 0.0;        // an inference's session.run
  double train_session_overhead_s = 0.0;  // a training step's (the Keras fit loop around it)
  double pcie_bytes_per_s = 1.0;
  double cpu_job_slowdown = 0.0;
  double transfer_fixed_s = 0.0;
  double transfer_per_variable_s = 0.0;
  double transfer_bytes_per_s = 1.0;
  int input_size = 224;
  double tf_overhead = 1.0;
  double mps_process_overhead_bytes = 0.0;
  double mps_capacity = 1.0;
  struct Dvfs {
    double min_mhz = 0.0;
    double default_mhz = 0.0;
    double step_mhz = 0.0;
    double min_v = 0.0;
    double max_v = 0.0;
    double knee_mhz = 0.0;
  };
  std::map<std::string, Dvfs> dvfs;
  double train_time_exponent = 1.0;
  double infer_time_exponent = 1.0;
  double batch_half = 0.0;
  double train_busy_fraction = 1.0;
  double infer_busy_fraction = 1.0;
  double cpu_busy_w = 0.0;
};

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;
constexpr const char* kNmt = "nmt_wmt16";
constexpr int kCalibratedBatch = 32;  // the batch of every training figure
constexpr int kInferBatch = 128;      // the batch of Fig. 3's inference figures

std::map<std::string, double> number_map(const JsonFields& fields, std::string_view key, double scale) {
  std::map<std::string, double> values;
  const auto& object = fields.at(key);
  if (!object.is_object()) throw fields.error(key, "must be an object of model id → number");
  const JsonFields inner = fields.object(key);
  for (const auto& [id, value] : object.items()) values[id] = inner.positive(id) * scale;
  return values;
}

ShareTwin::Calibration read_calibration(const std::string& file) {
  const auto json = load_json_file(file);
  const JsonFields top(json, file);
  ShareTwin::Calibration c;
  const auto gpus = top.object("gpus");
  for (const auto& [id, value] : top.at("gpus").items()) {
    const auto g = gpus.object(id);
    ShareTwin::Calibration::Gpu gpu;
    gpu.train_img_s = number_map(g, "train_bs32_img_s", 1.0);
    if (g.has("infer_bs1_ms")) gpu.infer_bs1_s = number_map(g, "infer_bs1_ms", 1e-3);
    if (g.has("train_bs32_gpu_ms")) gpu.train_gpu_s = number_map(g, "train_bs32_gpu_ms", 1e-3);
    for (const auto& [model, gpu_s] : gpu.train_gpu_s) {
      const auto step = gpu.train_img_s.find(model);
      if (step == gpu.train_img_s.end()) throw g.error("train_bs32_gpu_ms", fmt::format("{}: has no train_bs32_img_s on {}", model, id));
      if (gpu_s >= kCalibratedBatch / step->second) {
        throw g.error("train_bs32_gpu_ms", fmt::format("{}: {:g} ms is not shorter than its step, {:.4g} ms ({:g} img/s at BS 32)", model,
                                                       1e3 * gpu_s, 1e3 * kCalibratedBatch / step->second, step->second));
      }
    }
    gpu.relative_to = g.string_or("relative_to", "");
    gpu.relative_speed = g.positive_or("relative_speed", 1.0);
    c.gpus[id] = std::move(gpu);
  }
  for (const auto& [id, gpu] : c.gpus) {
    // A step given as GPU time and host stage apart does not scale as one figure by relative_speed.
    if (const auto it = c.gpus.find(gpu.relative_to); it != c.gpus.end() && !it->second.train_gpu_s.empty()) {
      throw gpus.object(id).error("relative_to", fmt::format("'{}' gives its steps' GPU time apart (train_bs32_gpu_ms): not scalable", gpu.relative_to));
    }
    if (!gpu.relative_to.empty() && !c.gpus.contains(gpu.relative_to)) {
      throw gpus.object(id).error("relative_to", fmt::format("'{}' is not a GPU of this file", gpu.relative_to));
    }
  }
  const auto jpeg = top.object("jpeg");
  c.pipelines_at_once = jpeg.non_negative("pipelines_at_once");
  c.train_input_share = jpeg.non_negative("train_input_share");
  if (c.train_input_share > 1.0) throw jpeg.error("train_input_share", "is a fraction: at most 1");
  for (const auto& [id, value] : top.at("jpeg").items()) {
    if (!value.is_object()) continue;
    if (!c.gpus.contains(id)) throw jpeg.error(id, "is not a GPU of this file");
    const auto g = jpeg.object(id);
    auto& gpu = c.gpus[id];
    gpu.jpeg_train_host_s_per_image = number_map(g, "train_bs32_host_ms", 1e-3 / kCalibratedBatch);
    gpu.jpeg_infer_host_s_per_image = number_map(g, "infer_bs128_host_ms", 1e-3 / kInferBatch);
    gpu.infer_bs128_s = number_map(g, "infer_bs128_gpu_ms", 1e-3);
  }
  const auto cpu = top.object("cpu");
  c.cpu_relative_to = cpu.string("slowdown_vs");
  if (!c.gpus.contains(c.cpu_relative_to)) throw cpu.error("slowdown_vs", "is not a GPU of this file");
  c.cpu_slowdown = cpu.positive("slowdown");
  const auto step = top.object("step");
  c.backward_factor = step.non_negative("backward_factor");
  c.kernel_spread_sigma = step.non_negative("kernel_spread_sigma");
  c.step_jitter = step.non_negative("step_jitter_fraction");
  const auto stream = top.object("stream");
  c.queue_depth = static_cast<int>(stream.positive_integer("queue_depth_ops"));
  c.train_launch_s = stream.non_negative("train_launch_s");
  c.infer_flop_rate = stream.positive("infer_flop_rate");
  c.infer_max_gpu_share = stream.fraction("infer_max_gpu_share");
  c.nmt_decode_steps = static_cast<int>(stream.positive_integer("nmt_decode_steps"));
  const auto host = top.object("host");
  c.session_overhead_s = host.non_negative("session_overhead_s");
  c.train_session_overhead_s = host.non_negative("train_session_overhead_s");
  c.pcie_bytes_per_s = host.positive("pcie_bytes_per_s");
  c.cpu_job_slowdown = host.non_negative("cpu_job_slowdown");
  const auto transfer = top.object("transfer");
  c.transfer_fixed_s = transfer.non_negative("fixed_s");
  c.transfer_per_variable_s = transfer.non_negative("per_variable_s");
  c.transfer_bytes_per_s = transfer.positive("bytes_per_s");
  const auto memory = top.object("memory");
  c.tf_overhead = memory.positive("tf_overhead");
  c.input_size = static_cast<int>(top.positive_integer("input_size"));
  c.mps_process_overhead_bytes = memory.non_negative("mps_process_overhead_bytes");
  c.mps_capacity = top.object("mps").positive("capacity");
  const auto dvfs = top.object("dvfs");
  for (const auto& [id, value] : top.at("dvfs").items()) {
    if (!value.is_object()) continue;
    const auto d = dvfs.object(id);
    ShareTwin::Calibration::Dvfs v;
    v.min_mhz = d.positive("min_mhz");
    v.default_mhz = d.positive("default_mhz");
    v.step_mhz = d.positive("step_mhz");
    v.min_v = d.positive("min_v");
    v.max_v = d.positive("max_v");
    v.knee_mhz = d.positive("knee_mhz");
    if (!(v.min_mhz < v.default_mhz) || !(v.min_v <= v.max_v)) throw dvfs.error(id, "needs min_mhz < default_mhz and min_v <= max_v");
    c.dvfs[id] = v;
  }
  c.train_time_exponent = dvfs.positive("train_time_exponent");
  c.infer_time_exponent = dvfs.positive("infer_time_exponent");
  const auto power = top.object("power");
  c.batch_half = power.non_negative("batch_half");
  c.train_busy_fraction = power.fraction("train_busy_fraction");
  c.infer_busy_fraction = power.fraction("infer_busy_fraction");
  c.cpu_busy_w = power.non_negative("cpu_busy_w");
  return c;
}

// `input_size`: the input the twin feeds every model (SwitchFlow's benchmark scripts use 224 × 224;
// a model whose default differs has its figures at 224 under "at_input_224").
std::map<std::string, ShareModelFacts> read_models(const std::string& file, int input_size) {
  const auto json = load_json_file(file);
  const JsonFields top(json, file);
  const auto models = top.object("models");
  std::map<std::string, ShareModelFacts> out;
  for (const auto& [id, value] : top.at("models").items()) {
    const auto m = models.object(id);
    ShareModelFacts f;
    f.id = id;
    f.name = m.string_or("name", id);
    // The NMT decoder has no image input and no training figures: those fields are null.
    const auto number_or_zero = [&](std::string_view key) { return m.at(key).is_null() ? 0.0 : m.non_negative(key); };
    f.input_size = static_cast<int>(number_or_zero("input_size"));
    f.params_total = m.positive("params_total");
    f.params_trainable = m.non_negative("params_trainable");
    f.variables_total = static_cast<int>(m.positive_integer("variables_total"));
    f.variables_trainable = static_cast<int>(m.integer("variables_trainable"));
    f.train_activation_bytes_per_image = number_or_zero("train_activation_mib_per_image") * kMiB;
    f.infer_activation_bytes_per_image = m.non_negative("infer_peak_activation_mib_per_image") * kMiB;
    f.kernels_per_train_step = static_cast<int>(number_or_zero("gpu_kernels_per_train_step"));
    f.kernels_per_inference = static_cast<int>(m.positive("gpu_kernels_per_inference"));
    f.gmacs_per_image = m.has("gmacs_per_image") ? number_or_zero("gmacs_per_image") : 0.0;
    if (f.input_size > 0 && f.input_size != input_size) {
      if (input_size != 224 || !m.has("at_input_224")) {
        throw m.error("input_size", fmt::format("has no figures at the {} × {} input the twin runs", input_size, input_size));
      }
      const auto at = m.object("at_input_224");
      f.input_size = 224;
      f.train_activation_bytes_per_image = at.non_negative("train_activation_mib_per_image") * kMiB;
      f.infer_activation_bytes_per_image = at.non_negative("infer_peak_activation_mib_per_image") * kMiB;
      if (at.has("gmacs_per_image")) f.gmacs_per_image = at.non_negative("gmacs_per_image");
    }
    out[id] = f;
  }
  return out;
}

// devices.json (data/sched/README.md): the GPUs with the memory their framework could use (TF's
// on the paper's servers) and their power, and the host CPU.
std::map<std::string, ShareDeviceFacts> read_devices(const std::string& file) {
  const auto json = load_json_file(file);
  const JsonFields top(json, file);
  std::map<std::string, ShareDeviceFacts> out;
  const auto gpus = top.object("gpus");
  for (const auto& [id, value] : top.at("gpus").items()) {
    const auto g = gpus.object(id);
    const auto memory = g.object("memory");
    const auto power = g.object("power");
    ShareDeviceFacts f;
    f.info.id = id;
    f.info.kind = sched::DeviceKind::gpu;
    f.name = g.string_or("name", id);
    // What the framework may allocate: TF's limit on the paper's servers, else an estimate.
    f.info.memory_bytes = memory.has("tf_memory_limit_bytes_switchflow_server") ? memory.positive("tf_memory_limit_bytes_switchflow_server")
                          : memory.has("usable_gib_estimate")                   ? memory.positive("usable_gib_estimate") * kGiB
                                                                                 : memory.positive("tf_memory_limit_gib_estimate") * kGiB;
    f.info.idle_power_w = power.has("idle_with_cuda_context_w") ? power.positive("idle_with_cuda_context_w")
                                                                 : power.positive("idle_power_w");
    f.info.max_power_w = power.positive("default_power_limit_w");
    out[id] = f;
  }
  const auto cpu = top.object("cpu");
  ShareDeviceFacts f;
  f.info.id = "cpu";
  f.info.kind = sched::DeviceKind::cpu;
  f.name = cpu.string_or("assumed_model", "host CPU");
  const double sockets = cpu.positive("sockets");
  f.info.idle_power_w = sockets * cpu.positive("idle_power_w_per_socket");
  f.info.max_power_w = sockets * cpu.positive("tdp_w_per_socket");
  out["cpu"] = f;
  return out;
}

std::uint64_t name_seed(const std::string& text) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a: the same seed for a name on every platform
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

}  // namespace

ShareTwin::ShareTwin(const std::string& data_dir, std::uint64_t seed) : seed_(seed) {
  const auto dir = std::filesystem::path(data_dir) / "sched";
  calibration_ = std::make_shared<const Calibration>(read_calibration((dir / "calibration.json").string()));
  models_ = read_models((dir / "models.json").string(), calibration_->input_size);
  devices_ = read_devices((dir / "devices.json").string());
  for (const auto& [id, gpu] : calibration_->gpus) {
    if (!devices_.contains(id)) {
      throw Error(ErrorCode::invalid_data, fmt::format("{}: GPU '{}' has timings but no entry in devices.json",
                                                       (dir / "calibration.json").string(), id));
    }
  }
}

sched::DeviceInfo ShareTwin::device(const std::string& id) const {
  const auto it = devices_.find(id);
  if (it == devices_.end()) throw usage_error(fmt::format("unknown device '{}' (the share twin knows {})", id, joined(device_ids())));
  return it->second.info;
}

std::string ShareTwin::device_name(const std::string& id) const {
  (void)device(id);  // Error(usage) for an unknown one
  return devices_.at(id).name;
}

std::vector<std::string> ShareTwin::device_ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, d] : devices_) ids.push_back(id);
  return ids;
}

std::vector<std::string> ShareTwin::model_ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, m] : models_) ids.push_back(id);
  return ids;
}

const ShareModelFacts& ShareTwin::model(const std::string& id) const {
  const auto it = models_.find(id);
  if (it == models_.end()) throw usage_error(fmt::format("unknown model '{}' for gpucap share (known: {})", id, joined(model_ids())));
  return it->second;
}

namespace {

// Seconds of one step of `model` on GPU `gpu` from one of its tables (`seconds_of` turns a table
// entry into seconds), following relative_to — and dividing by each GPU's relative_speed on the
// way back — where the table lacks the model.
template <typename Table, typename Seconds>
std::optional<double> calibrated_s(const ShareTwin::Calibration& c, const std::string& model, const std::string& gpu,
                                   Table table, Seconds seconds_of) {
  for (std::string at = gpu; !at.empty();) {
    const auto& g = c.gpus.at(at);
    const auto& entries = g.*table;
    if (const auto it = entries.find(model); it != entries.end()) {
      double t = seconds_of(it->second);
      for (std::string back = gpu; back != at; back = c.gpus.at(back).relative_to) t /= c.gpus.at(back).relative_speed;
      return t;
    }
    at = g.relative_to;
  }
  return std::nullopt;
}

// A training step at BS 32.
std::optional<double> train_step_s(const ShareTwin::Calibration& c, const std::string& model, const std::string& gpu) {
  return calibrated_s(c, model, gpu, &ShareTwin::Calibration::Gpu::train_img_s,
                      [](double img_s) { return kCalibratedBatch / img_s; });
}

// A BS-1 inference.
std::optional<double> infer_bs1_s(const ShareTwin::Calibration& c, const std::string& model, const std::string& gpu) {
  return calibrated_s(c, model, gpu, &ShareTwin::Calibration::Gpu::infer_bs1_s, [](double s) { return s; });
}

// A BS-128 inference's GPU time (Fig. 3(d), (e)), where the paper gives one.
std::optional<double> infer_bs128_s(const ShareTwin::Calibration& c, const std::string& model, const std::string& gpu) {
  return calibrated_s(c, model, gpu, &ShareTwin::Calibration::Gpu::infer_bs128_s, [](double s) { return s; });
}

// Host seconds per image of a JPEG input pipeline: a property of the host, so a GPU without the
// figure takes its relative_to's unscaled.
std::optional<double> jpeg_host_s_per_image(const ShareTwin::Calibration& c, const std::string& model, const std::string& gpu,
                                            bool training) {
  for (std::string at = gpu; !at.empty(); at = c.gpus.at(at).relative_to) {
    const auto& g = c.gpus.at(at);
    const auto& table = training ? g.jpeg_train_host_s_per_image : g.jpeg_infer_host_s_per_image;
    if (const auto it = table.find(model); it != table.end()) return it->second;
  }
  return std::nullopt;
}

// Host stage of a step: the synthetic batch's copy to the GPU and the session's own overhead —
// or, where the GPU's table gives a training step's GPU time, the rest of that step (per image).
double host_stage_s(const ShareTwin::Calibration& c, const ShareModelFacts& m, int batch, bool training, bool on_cpu,
                    const std::string& gpu) {
  if (training && !on_cpu) {
    const auto& g = c.gpus.at(gpu);
    if (const auto it = g.train_gpu_s.find(m.id); it != g.train_gpu_s.end()) {
      return (kCalibratedBatch / g.train_img_s.at(m.id) - it->second) * batch / kCalibratedBatch;
    }
  }
  const double input_bytes = 4.0 * 3.0 * m.input_size * m.input_size * batch;
  return (training ? c.train_session_overhead_s : c.session_overhead_s) + (on_cpu ? 0.0 : input_bytes / c.pcie_bytes_per_s);
}

}  // namespace

// The step's host stage: a JPEG pipeline (Fig. 3) or the synthetic batch's copy.
double step_host_s(const ShareTwin::Calibration& c, const ShareModelFacts& m, const sched::JobSpec& job, const std::string& gpu,
                   bool on_cpu) {
  if (!job.jpeg_input) return host_stage_s(c, m, job.batch_size, job.mode == sched::Mode::training, on_cpu, gpu);
  return *jpeg_host_s_per_image(c, job.model, gpu, job.mode == sched::Mode::training) * job.batch_size;
}

void ShareTwin::check(const sched::JobSpec& job, const sched::DeviceInfo& device) const {
  (void)model(job.model);
  const auto& c = *calibration_;
  const std::string gpu = device.kind == sched::DeviceKind::cpu ? c.cpu_relative_to : device.id;
  if (!c.gpus.contains(gpu)) throw usage_error(fmt::format("the share twin has no timings for device '{}'", device.id));
  if (job.model == kNmt) {
    if (job.mode == sched::Mode::training) throw usage_error("the share twin models nmt_wmt16 inference only (SwitchFlow Fig. 6(d))");
    if (job.batch_size != 1) throw usage_error("the share twin has figures for nmt_wmt16 at batch 1 only (SwitchFlow Fig. 6(d))");
  }
  if (!infer_bs1_s(c, job.model, gpu)) {
    throw usage_error(fmt::format("the share twin has no BS-1 timing of {} on {}", job.model, device.id));
  }
  if (job.model != kNmt && !train_step_s(c, job.model, gpu)) {
    throw usage_error(fmt::format("the share twin has no training timing of {} on {}", job.model, device.id));
  }
  // Where a step's host stage is known only for training (the batch drawn on the CPU), an
  // inference batch's is not: only the BS-1 request was measured.
  if (job.mode == sched::Mode::inference && job.batch_size != 1 && c.gpus.at(gpu).train_gpu_s.contains(job.model)) {
    throw usage_error(fmt::format("the share twin has {}'s inference on {} at batch 1 only (the measured request)", job.model, device.id));
  }
  if (job.jpeg_input && !jpeg_host_s_per_image(c, job.model, gpu, job.mode == sched::Mode::training)) {
    throw usage_error(fmt::format("the share twin has no JPEG input timing of {} (SwitchFlow Fig. 3 lacks it): use input=synthetic",
                                  job.model));
  }
}

double ShareTwin::device_stage_s(const sched::JobSpec& job, const sched::DeviceInfo& device) const {
  check(job, device);
  const auto& c = *calibration_;
  const bool on_cpu = device.kind == sched::DeviceKind::cpu;
  const std::string gpu = on_cpu ? c.cpu_relative_to : device.id;
  const double scale = on_cpu ? c.cpu_slowdown : 1.0;
  const auto& m = model(job.model);
  // The figures are end to end: a step's host stage (input copy, session overhead) is taken out.
  const double t1 = std::max(0.1 * *infer_bs1_s(c, job.model, gpu), *infer_bs1_s(c, job.model, gpu) - host_stage_s(c, m, 1, false, false, gpu));
  if (job.model == kNmt) return t1 * scale;
  // A forward pass: t1 + (b − 1)·t_img, with t_img such that (1 + backward) forwards at BS 32
  // make the calibrated training step.
  const double passes = 1.0 + c.backward_factor;
  const double t32 = *train_step_s(c, job.model, gpu) - host_stage_s(c, m, kCalibratedBatch, true, false, gpu);
  double per_image = std::max(0.0, (t32 / passes - t1) / (kCalibratedBatch - 1));
  // Inference where Fig. 3 gives a BS-128 GPU time: the line through BS 1 and BS 128 instead.
  if (job.mode == sched::Mode::inference) {
    if (const auto t128 = infer_bs128_s(c, job.model, gpu)) per_image = std::max(0.0, (*t128 - t1) / (kInferBatch - 1));
  }
  const double forward = t1 + (job.batch_size - 1) * per_image;
  return (job.mode == sched::Mode::training ? passes * forward : forward) * scale;
}

sched::StepProfile ShareTwin::step(const sched::JobSpec& job, const sched::DeviceInfo& device, std::int64_t step) const {
  const auto& c = *calibration_;
  const auto& m = model(job.model);
  const bool training = job.mode == sched::Mode::training;
  const bool on_cpu = device.kind == sched::DeviceKind::cpu;
  check(job, device);  // the feed's cache is by model, mode, batch and device only
  sched::StepProfile p;
  const Feed& feed = feed_for(job, device);
  Noise jitter(derive_seed(seed_ ^ name_seed(job.name + "/" + job.model), static_cast<std::uint64_t>(step)));
  const double step_scale = std::max(0.5, 1.0 + c.step_jitter * jitter.gaussian());
  p.kernels_s.reserve(feed.kernels_s.size());
  for (const double k : feed.kernels_s) p.kernels_s.push_back(k * step_scale);
  p.launch_s = feed.launch_s;
  p.sync_every = feed.sync_every;
  p.host_s = step_host_s(c, m, job, on_cpu ? c.cpu_relative_to : device.id, on_cpu);
  p.input_pipeline = job.jpeg_input;
  if (training && job.jpeg_input) {
    p.device_gap_s = (1.0 - c.train_input_share) * p.host_s;
    p.host_s -= p.device_gap_s;
  }

  const double weights_bytes = 4.0 * m.params_total;
  if (training) {
    p.persistent_bytes = weights_bytes + 4.0 * m.params_trainable;  // + one momentum slot each
    p.activation_bytes = m.train_activation_bytes_per_image * job.batch_size * c.tf_overhead;
    p.state_bytes = p.persistent_bytes;
    p.state_variables = m.variables_total + m.variables_trainable;  // momentum slots are variables too
  } else {
    p.persistent_bytes = weights_bytes;  // a frozen graph: its weights are constants, nothing to move
    p.activation_bytes = m.infer_activation_bytes_per_image * job.batch_size * c.tf_overhead;
  }
  if (on_cpu) {
    p.busy_power_w = device.idle_power_w + c.cpu_busy_w;
  } else {
    const auto saturation = [&](double b) { return b / (b + c.batch_half); };
    const double fraction = training ? c.train_busy_fraction * saturation(job.batch_size) / saturation(kCalibratedBatch)
                                     : c.infer_busy_fraction;
    p.busy_power_w = device.idle_power_w + fraction * (device.max_power_w - device.idle_power_w);
  }
  return p;
}

// Kernels: a fixed, seeded spread of sizes per model and mode (large convolutions and many small
// element-wise ops). How the stage's time splits between them and the host's per-op dispatch
// (docs/simulator.md, "Free sharing"): a training step keeps the GPU busy, its ops dispatched
// every train_launch_s (at most half its time per op); an inference's GPU work is its FLOPs at
// infer_flop_rate (at most infer_max_gpu_share of its time) and the rest is dispatch, so a BS-1
// request is host-paced. Either way the job alone takes its calibrated stage time. Solved once
// per (model, mode, batch, device).
const ShareTwin::Feed& ShareTwin::feed_for(const sched::JobSpec& job, const sched::DeviceInfo& device) const {
  const bool training = job.mode == sched::Mode::training;
  const std::string key = fmt::format("{}/{}/{}/{}", job.model, training ? "train" : "infer", job.batch_size, device.id);
  const std::lock_guard lock(feeds_mutex_);
  if (const auto it = feeds_.find(key); it != feeds_.end()) return it->second;
  const auto& c = *calibration_;
  const auto& m = model(job.model);
  const double stage_s = device_stage_s(job, device);
  const int count = std::max(1, training ? m.kernels_per_train_step : m.kernels_per_inference);
  Noise noise(name_seed(job.model + (training ? "/train" : "/infer")));
  std::vector<double> shape(static_cast<std::size_t>(count));
  double total = 0.0;
  for (auto& w : shape) {
    w = std::exp(c.kernel_spread_sigma * noise.gaussian());
    total += w;
  }
  Feed feed;
  if (device.kind == sched::DeviceKind::cpu) {  // chunks of the work, nothing to launch
    for (const double w : shape) feed.kernels_s.push_back(stage_s * w / total);
  } else if (training) {
    feed.launch_s = std::min(c.train_launch_s, 0.5 * stage_s / count);  // stays GPU-paced
    feed.kernels_s = sched::kernels_for_chain(shape, feed.launch_s, stage_s);
  } else {
    if (job.model == kNmt) feed.sync_every = std::max(1, count / c.nmt_decode_steps);
    const double flops = 2e9 * m.gmacs_per_image * job.batch_size;
    const double gpu_s = flops > 0.0 ? std::min(c.infer_max_gpu_share * stage_s, flops / c.infer_flop_rate)
                                     : c.infer_max_gpu_share * stage_s;
    for (const double w : shape) feed.kernels_s.push_back(gpu_s * w / total);
    feed.launch_s = sched::launch_for_chain(feed.kernels_s, feed.sync_every, stage_s);
  }
  return feeds_.emplace(key, std::move(feed)).first->second;
}

int ShareTwin::stream_queue_depth() const { return calibration_->queue_depth; }

double ShareTwin::transfer_s(const sched::JobSpec& job, const sched::DeviceInfo& from, const sched::DeviceInfo& to) const {
  if (job.mode != sched::Mode::training || from.id == to.id) return 0.0;
  const auto p = step(job, from, 0);
  const auto& c = *calibration_;
  return c.transfer_fixed_s + p.state_variables * c.transfer_per_variable_s + p.state_bytes / c.transfer_bytes_per_s;
}

double ShareTwin::host_slowdown_with_cpu_job() const { return calibration_->cpu_job_slowdown; }

double ShareTwin::process_overhead_bytes(const sched::DeviceInfo& device) const {
  return device.kind == sched::DeviceKind::gpu ? calibration_->mps_process_overhead_bytes : 0.0;
}

double ShareTwin::mps_capacity() const { return calibration_->mps_capacity; }

double ShareTwin::input_pipelines_at_once() const { return calibration_->pipelines_at_once; }

std::vector<double> ShareTwin::clock_levels_mhz(const sched::DeviceInfo& device) const {
  const auto it = calibration_->dvfs.find(device.id);
  if (it == calibration_->dvfs.end()) return {};
  std::vector<double> levels;
  const auto& d = it->second;
  for (double f = d.min_mhz; f < d.default_mhz - 1e-9; f += d.step_mhz) levels.push_back(f);
  levels.push_back(d.default_mhz);
  return levels;
}

sched::ClockScaling ShareTwin::clock_scaling(const sched::DeviceInfo& device, sched::Mode mode, double clock_mhz) const {
  const auto it = calibration_->dvfs.find(device.id);
  if (it == calibration_->dvfs.end() || clock_mhz <= 0.0) return {};
  const auto& d = it->second;
  const double f = std::clamp(clock_mhz, d.min_mhz, d.default_mhz);
  const auto volts = [&](double mhz) {
    if (mhz <= d.knee_mhz) return d.min_v;
    return d.min_v + (d.max_v - d.min_v) * (mhz - d.knee_mhz) / (d.default_mhz - d.knee_mhz);
  };
  const double exponent = mode == sched::Mode::training ? calibration_->train_time_exponent : calibration_->infer_time_exponent;
  sched::ClockScaling s;
  s.time = std::pow(d.default_mhz / f, exponent);
  // Energy per unit of work ∝ V²; power ∝ f·V² at full activity, less as the kernels stretch.
  s.dynamic_power = (f / d.default_mhz) * std::pow(volts(f) / d.max_v, 2.0);
  return s;
}

}  // namespace gpucap::sim
