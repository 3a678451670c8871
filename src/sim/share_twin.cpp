#include "gpucap/sim/share_twin.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "gpucap/core/error.hpp"
#include "gpucap/sim/noise.hpp"
#include "gpucap/sched/stream_chain.hpp"
#include "share_twin_data.hpp"

namespace gpucap::sim {

namespace {


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
  calibration_ = std::make_shared<const Calibration>(read_share_calibration((dir / "calibration.json").string()));
  models_ = read_share_models((dir / "models.json").string(), calibration_->input_size);
  devices_ = read_share_devices((dir / "devices.json").string());
  for (const auto& [id, gpu] : calibration_->gpus) {
    if (!devices_.contains(id)) {
      throw Error(ErrorCode::invalid_data, fmt::format("{}: GPU '{}' has timings but no entry in devices.json",
                                                       (dir / "calibration.json").string(), id));
    }
  }
  for (const auto& [id, cpu] : calibration_->cpus) {
    const auto it = devices_.find(id);
    if (it == devices_.end() || it->second.info.kind != sched::DeviceKind::cpu) {
      throw Error(ErrorCode::invalid_data, fmt::format("{}: cpus.{} has timings but is not a CPU of devices.json",
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

namespace {

// A CPU device's figures (nullptr for a GPU); Error(usage) for a CPU without any.
const ShareTwin::Calibration::Cpu* cpu_figures(const ShareTwin::Calibration& c, const sched::DeviceInfo& device) {
  if (device.kind != sched::DeviceKind::cpu) return nullptr;
  const auto it = c.cpus.find(device.id);
  if (it == c.cpus.end()) throw usage_error(fmt::format("the share twin has no timings for device '{}'", device.id));
  return &it->second;
}

// A BS-32 training step measured on the CPU itself, where its table has the job's model.
std::optional<double> own_cpu_step_s(const ShareTwin::Calibration::Cpu* cpu, const sched::JobSpec& job) {
  if (cpu == nullptr || job.mode != sched::Mode::training) return std::nullopt;
  const auto it = cpu->train_step_s.find(job.model);
  return it == cpu->train_step_s.end() ? std::nullopt : std::optional(it->second);
}

// The GPU whose figures a step on `device` takes: the device itself, or the GPU a CPU's times are
// relative to ("" for a CPU with measured steps only).
std::string figures_gpu(const ShareTwin::Calibration::Cpu* cpu, const sched::DeviceInfo& device) {
  return cpu != nullptr ? cpu->relative_to : device.id;
}

}  // namespace

void ShareTwin::check(const sched::JobSpec& job, const sched::DeviceInfo& device) const {
  (void)model(job.model);
  const auto& c = *calibration_;
  const auto* cpu = cpu_figures(c, device);
  if (own_cpu_step_s(cpu, job)) {
    if (job.jpeg_input) throw usage_error(fmt::format("the share twin has no JPEG input timing on {}: use input=synthetic", device.id));
    return;
  }
  const std::string gpu = figures_gpu(cpu, device);
  if (gpu.empty()) {
    std::vector<std::string> measured;
    for (const auto& [id, s] : cpu->train_step_s) measured.push_back(id);
    throw usage_error(fmt::format("the share twin has only measured training steps on {} ({}): not {} {}", device.id,
                                  joined(measured), job.model, job.mode == sched::Mode::training ? "training" : "inference"));
  }
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
  const auto* cpu = cpu_figures(c, device);
  const auto& m = model(job.model);
  if (const auto step = own_cpu_step_s(cpu, job)) {
    // Measured on this CPU at BS 32, host stage included: the work scales with the batch.
    return std::max(0.0, *step - host_stage_s(c, m, kCalibratedBatch, true, true, "")) * job.batch_size / kCalibratedBatch;
  }
  const std::string gpu = figures_gpu(cpu, device);
  const double scale = cpu != nullptr ? cpu->slowdown : 1.0;
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
  p.host_s = step_host_s(c, m, job, figures_gpu(cpu_figures(c, device), device), on_cpu);
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

// A job's host work contends with the jobs computing on the CPU where their threads and its own
// host thread need more than the CPU's physical cores (the OS then shares cores among them, or a
// hyperthread shares one with a compute thread); with a core to spare, nothing is slowed. One
// fitted slowdown for the contended case (Fig. 7(d)).
double ShareTwin::host_slowdown_with_cpu_jobs(const sched::DeviceInfo& cpu, int jobs) const {
  const auto& c = *calibration_;
  const auto it = devices_.find(cpu.id);
  const int threads = jobs * cpu_figures(c, cpu)->job_threads + 1;
  const bool contended = it == devices_.end() || threads > it->second.cores;
  return contended ? c.cpu_job_slowdown : 0.0;
}

sched::DeviceInfo ShareTwin::lpu_device(const std::string& lpu, const std::string& gpu) const {
  const auto shared = devices_.find(gpu);
  if (shared == devices_.end() || shared->second.info.kind != sched::DeviceKind::gpu) return device(lpu);
  const std::string& host = shared->second.host;
  const auto info = device(lpu == "cpu" ? host : lpu);
  if (info.kind == sched::DeviceKind::cpu && info.id != host) {
    throw usage_error(fmt::format("--lpu {} is the CPU of another machine: {}'s host is {} (--lpu cpu)", lpu, gpu, host));
  }
  return info;
}

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
