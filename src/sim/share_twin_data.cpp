#include "share_twin_data.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"

namespace gpucap::sim {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

std::map<std::string, double> number_map(const JsonFields& fields, std::string_view key, double scale) {
  std::map<std::string, double> values;
  const auto& object = fields.at(key);
  if (!object.is_object()) throw fields.error(key, "must be an object of model id → number");
  const JsonFields inner = fields.object(key);
  for (const auto& [id, value] : object.items()) values[id] = inner.positive(id) * scale;
  return values;
}

}  // namespace

ShareTwin::Calibration read_share_calibration(const std::string& file) {
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
  const auto cpus = top.object("cpus");
  for (const auto& [id, value] : top.at("cpus").items()) {
    if (!value.is_object()) continue;  // "_source"
    const auto entry = cpus.object(id);
    ShareTwin::Calibration::Cpu cpu;
    if (entry.has("slowdown_vs")) {
      cpu.relative_to = entry.string("slowdown_vs");
      if (!c.gpus.contains(cpu.relative_to)) throw entry.error("slowdown_vs", "is not a GPU of this file");
      cpu.slowdown = entry.positive("slowdown");
    }
    if (entry.has("train_bs32_step_s")) cpu.train_step_s = number_map(entry, "train_bs32_step_s", 1.0);
    if (cpu.relative_to.empty() && cpu.train_step_s.empty()) {
      throw entry.error("train_bs32_step_s", "is needed where slowdown_vs is not: the CPU would have no figures");
    }
    cpu.job_threads = static_cast<int>(entry.positive_integer("job_threads"));
    c.cpus[id] = std::move(cpu);
  }
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
std::map<std::string, ShareModelFacts> read_share_models(const std::string& file, int input_size) {
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
std::map<std::string, ShareDeviceFacts> read_share_devices(const std::string& file) {
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
    f.host = g.string_or("host", "cpu");
    out[id] = f;
  }
  // The paper's servers' CPU, "cpu", and the CPUs of other machines (hosts).
  const auto cpu = top.object("cpu");
  ShareDeviceFacts f;
  f.info.id = "cpu";
  f.info.kind = sched::DeviceKind::cpu;
  f.name = cpu.string_or("assumed_model", "host CPU");
  const double sockets = cpu.positive("sockets");
  f.cores = static_cast<int>(sockets * static_cast<double>(cpu.positive_integer("cores_per_socket")));
  f.info.idle_power_w = sockets * cpu.positive("idle_power_w_per_socket");
  f.info.max_power_w = sockets * cpu.positive("tdp_w_per_socket");
  out["cpu"] = f;
  if (top.has("hosts")) {
    const auto hosts = top.object("hosts");
    for (const auto& [id, value] : top.at("hosts").items()) {
      if (!value.is_object()) continue;  // "_about"
      if (out.contains(id)) throw hosts.error(id, "is already a device of this file");
      const auto h = hosts.object(id);
      ShareDeviceFacts host;
      host.info.id = id;
      host.info.kind = sched::DeviceKind::cpu;
      host.name = h.string_or("name", id);
      host.cores = static_cast<int>(h.positive_integer("cores"));
      host.info.idle_power_w = h.non_negative("idle_power_w");
      host.info.max_power_w = h.positive("max_power_w");
      out[id] = host;
    }
  }
  // Each GPU's machine: its host CPU, where a CPU LPU is.
  for (auto& [id, d] : out) {
    if (d.info.kind != sched::DeviceKind::gpu) continue;
    const auto it = out.find(d.host);
    if (it == out.end() || it->second.info.kind != sched::DeviceKind::cpu) {
      throw gpus.object(id).error("host", fmt::format("'{}' is not a CPU of this file", d.host));
    }
  }
  return out;
}

}  // namespace gpucap::sim
