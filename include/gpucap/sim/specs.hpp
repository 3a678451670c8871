#pragma once
// Parameters of the GPU twin, read from data files (data/gpus, data/models, data/datasets).
// docs/simulator.md gives the source of every number.

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap::sim {

enum class Precision { fp32, fp16 };

[[nodiscard]] const char* to_string(Precision precision);

// Supply voltage versus SM clock: flat at min_v up to knee_mhz, then linear to max_v at the
// highest supported clock (the usual shape of a GPU V-f table; no vendor tables are public).
struct VoltageCurve {
  double min_v = 0.0;
  double max_v = 0.0;
  double knee_mhz = 0.0;
};

// Power = constant + static (∝ V³: leakage grows faster than linearly with voltage)
//       + clock tree (∝ V²f) + memory interface (∝ memory clock)
//       + SM dynamic (∝ V²·f·SM activity) + memory dynamic (∝ memory clock · memory activity).
// The "_w" terms are their values at the highest SM clock/voltage and memory clock.
struct PowerParams {
  double constant_w = 0.0;
  double static_w = 0.0;
  double clock_tree_w = 0.0;
  double memory_clock_w = 0.0;
  double sm_dynamic_w = 0.0;
  double memory_dynamic_w = 0.0;
};

// The on-board power sensor as NVML reports it: a new reading every update_period_s, each the
// average of the true power over the last averaging_window_s, with relative Gaussian noise; with
// hold_s > 0, the highest such average of the last hold_s.
struct SensorParams {
  double update_period_s = 0.0;
  double averaging_window_s = 0.0;
  double noise_fraction = 0.0;
  double hold_s = 0.0;  // optional in a GPU file; 0: none
};

// Host-side costs of one batch (framework, launches, input copy).
struct HostParams {
  double pcie_gbps = 0.0;          // host-to-device copy bandwidth for the input batch
  double batch_sync_s = 0.0;       // fixed cost per batch: session call, synchronisation
  double layer_launch_s = 0.0;     // host time to launch one layer's kernels (overlaps GPU work)
  // How long the host side of a training loop (data loading, the Python step) takes on the machine
  // this GPU sits in, relative to the datasets' figures (sim/training_step.hpp): Zeus measured each
  // GPU in its own server.
  double training_loop_scale = 1.0;
  // A training step whose batches change shape (sequences padded to the longest of their batch)
  // defeats the framework's caching allocator as the batch nears the GPU's memory: blocks cached
  // for one shape do not fit the next, so it frees them and allocates anew (cudaFree, cudaMalloc),
  // on the host's side of the loop. Host seconds per step when a batch fills the memory; at a
  // fraction u of it, this × u^kAllocatorPressureExponent (sim/training_step.hpp). 0: none.
  double allocator_s = 0.0;
  // The BatchDVFS harness's nvidia-smi sampler on this machine (sim/spawned_sampler.hpp): one
  // process from spawn to exit, and the stall each one causes. Defaults: the P40 host's, from its
  // logs (docs/simulator.md).
  double nvidia_smi_process_s = 0.139;
  double nvidia_smi_stall_s = 0.061;
};

struct GpuSpec {
  std::string id;
  std::string source_file;  // the data file it was read from
  // Values of fitted keys before calibration (the file's "_prior" object, dotted keys).
  std::map<std::string, double> priors;
  std::string name;
  std::vector<std::string> aliases;
  int sm_count = 0;
  int fp32_lanes_per_sm = 0;
  double fp16_tflops = 0.0;             // dense FP16 peak at boost clock (tensor cores where present)
  double memory_bandwidth_gbps = 0.0;   // at the highest memory clock
  double memory_efficiency = 0.0;       // achievable fraction of memory bandwidth
  double memory_gib = 0.0;              // device memory (datasheet); 0: unknown (no memory pressure modelled)
  std::vector<double> sm_clocks_mhz;    // supported SM clocks, ascending
  double boost_clock_mhz = 0.0;         // where the GPU runs when clocks are not locked
  double base_clock_mhz = 0.0;
  std::vector<double> memory_clocks_mhz;  // supported memory clocks, ascending
  double default_memory_clock_mhz = 0.0;
  double power_limit_min_w = 0.0;
  double power_limit_max_w = 0.0;
  double power_limit_default_w = 0.0;
  double idle_power_w = 0.0;            // board idle, no context, lowest P-state
  std::vector<double> dvfs_levels_mhz;  // clock levels the seed DVFS controllers step through
  double saturation_kelems_per_sm = 0.0;  // feature-map elements per layer, per SM, that half-fill the GPU (thousands)
  // How compute, memory and launch time combine into the busy time: the p-norm
  // (t_c^k + t_m^k + t_l^k)^(1/k); 0 means the maximum (a pure roofline, k → ∞).
  double busy_overlap_exponent = 0.0;
  double fp16_efficiency_scale = 1.0;   // tensor-core efficiency of this GPU relative to the model's figure
  double fp32_efficiency_scale = 1.0;   // FP32 efficiency of this GPU (and its usual framework) likewise
  // Achieved compute rate ∝ (f / boost)^exponent: 1 is ideal clock scaling; below 1, parts of the
  // chip that do not follow the SM clock (L2, crossbar) make throughput less clock-sensitive.
  double clock_scaling_exponent = 1.0;
  // How unevenly a batch's layers fill the GPU. Early layers (large feature maps) fill it even at
  // batch 1; late, narrow ones do not. The busy phase's first half runs at SM activity a·(1+δ), the
  // second at a·(1−δ), with δ = activity_spread · (1 − occupancy): no spread once every layer
  // fills the GPU. Energy and time are unchanged; a sensor that samples fast sees the peak. In [0, 1].
  double activity_spread = 0.0;
  // Engines that benchmark convolution algorithms the first time they see an input shape (TF1 with
  // cuDNN autotuning, PyTorch with cudnn.benchmark) spend extra time on the first batch of each
  // new batch size, at busy power: autotune_compute_factor × the batch's compute time (every
  // candidate algorithm runs every convolution) + autotune_fixed_s (allocation, synchronisation,
  // per-shape bookkeeping). See GpuTwin::set_autotune_new_shapes.
  double autotune_compute_factor = 0.0;
  double autotune_fixed_s = 0.0;
  // The first batch an autotuning engine runs also loads the model (TF1: graph import, cuDNN
  // handles, workspaces) and tries the first shape's algorithms, some of which spread over more
  // SMs than the batch fills: its autotuning runs at the higher of the batch's own SM activity and
  // the model's at this batch size (fractional: the occupancy is continuous in the batch size).
  // So a model with wide layers draws much more than a narrow one. 0: the batch's own.
  double first_autotune_batch = 0.0;
  double latency_jitter_fraction = 0.0;
  // Several tenants under NVIDIA MPS (sim/mps_model.hpp): each extra co-running process slows every
  // tenant's kernels by this fraction (L2 and scheduler contention), and a change of the MPS
  // shares restarts the worker processes, which takes mps_restart_s with the GPU idle.
  double mps_interference_per_tenant = 0.04;
  double mps_restart_s = 3.0;
  VoltageCurve voltage;
  PowerParams power;
  SensorParams sensor;
  HostParams host;

  [[nodiscard]] double max_sm_clock_mhz() const { return sm_clocks_mhz.back(); }
  [[nodiscard]] double min_sm_clock_mhz() const { return sm_clocks_mhz.front(); }
  [[nodiscard]] double max_memory_clock_mhz() const { return memory_clocks_mhz.back(); }
};

struct ModelSpec {
  std::string id;
  std::string source_file;  // the data file it was read from
  // Values of fitted keys before calibration (the file's "_prior" object, dotted keys).
  std::map<std::string, double> priors;
  std::string name;
  std::vector<std::string> aliases;
  std::string family;                 // "tf-slim", "torchvision", or "zeus-training"
  // A workload of Zeus's training traces (family "zeus-training"): the twin knows its training step
  // only, and refuses to run it as inference.
  [[nodiscard]] bool training_only() const { return family == kTrainingOnlyFamily; }
  static constexpr const char* kTrainingOnlyFamily = "zeus-training";
  int input_size = 0;                 // square input, pixels
  double params_m = 0.0;              // parameters, millions
  double gmacs = 0.0;                 // multiply-accumulates per image at input_size, billions
  double activation_melems = 0.0;     // feature-map elements written per image, millions (estimate)
  int layers = 0;                     // conv/linear layers (kernel groups launched per batch)
  Precision precision = Precision::fp32;  // what the seed systems ran it in
  double fp32_efficiency = 0.0;       // achievable fraction of FP32 peak at full occupancy
  double fp16_efficiency = 0.0;       // achievable fraction of FP16 peak at full occupancy
  double power_intensity = 1.0;       // switching activity per busy SM relative to a dense convnet
  // Host launch cost per layer relative to the GPU's layer_launch_s: how many framework ops each
  // layer dispatches (eager PyTorch launches conv, norm and activation separately; depthwise
  // blocks launch more small kernels per MAC than dense ones).
  double launch_scale = 1.0;
  // How much of the small-batch slowdown leaves SMs idle: the batch at which the SMs draw half
  // their busy power is this multiple of the batch that half-fills the GPU in time (1: all of it,
  // power follows occupancy; towards 0: the SMs stay busy at small batches, running smaller and
  // less efficient kernels, so power barely falls with the batch; above 1: power saturates at
  // larger batches than time does).
  double power_saturation_scale = 1.0;
  // Spread of SM activity between the phases of a step that does not fade as the batch grows
  // (convolutions against recurrent or attention layers, forward against optimizer): added to the
  // GPU's occupancy-driven activity_spread. A power limiter holds the busier phase to the limit,
  // so the step averages below it. In [0, 1]; 0 for a model of one kind of layer.
  double power_phase_spread = 0.0;
  // The fraction of the batch's compute time that does not follow the SM clock: kernels bound by
  // the L2, the crossbar or memory latency (depthwise and pointwise convolutions, normalisation,
  // element-wise layers) rather than by the SMs. It depends on the model's layer mix and on the
  // GPU (its L2 and crossbar against its SMs), so it is given per GPU id. In [0, 1); a GPU not
  // listed has 0: compute time scales with the SM clock as the GPU's clock_scaling_exponent says.
  std::map<std::string, double> clock_independent_fraction;
  // Per GPU id: how efficiently the engine that GPU was measured with runs this model there,
  // relative to compute_efficiency (cuDNN's kernel choices differ by architecture and by layer
  // mix: a Hopper's tensor cores suit VGG's large convolutions more than MobileNet's depthwise
  // ones). A GPU not listed has 1; calibrated from real-GPU sweeps (data/calibration/real.json).
  std::map<std::string, double> gpu_efficiency_scale;
  // A training step (sim/training_step.hpp) runs forward, backward and the optimizer: its kernels
  // reach this multiple of the inference kernels' efficiency (smaller, memory-bound gradient
  // kernels; a different framework than the inference figures came from).
  double training_efficiency_scale = 1.0;
  // How a training step fills the GPU at small batches against inference: the batch that half
  // fills it is training_saturation_scale × the forward pass's (weight-gradient and batch-norm
  // kernels reduce over the batch, so a small batch leaves them short of parallel work), and the
  // batch at which its SMs draw half their busy power is training_power_saturation_scale × that
  // (small, inefficient kernels still keep the SMs switching). Both 1: as in inference. Zeus's
  // ResNet-50 epochs at batch 8 are 1.7× the large-batch time per sample at the same power
  // (docs/simulator.md, "Training under a power limit").
  double training_saturation_scale = 1.0;
  double training_power_saturation_scale = 1.0;
  // Multiplies the batch that half fills the GPU (half_saturation_batch). Not read from files:
  // 1 for inference; training_step_model sets it to training_saturation_scale.
  double saturation_batch_scale = 1.0;
  // Device memory a training step holds per sample of a typical length (activations kept for the
  // backward pass, their gradients, workspaces), in MiB; it grows with the padding like the work.
  // With GpuSpec::memory_gib it says how full a batch makes the GPU. 0: not modelled.
  double training_mib_per_sample = 0.0;
};

struct DatasetSpec {
  std::string id;
  std::string source_file;  // the data file it was read from
  // Values of fitted keys before calibration (the file's "_prior" object, dotted keys).
  std::map<std::string, double> priors;
  std::string name;
  std::vector<std::string> aliases;
  long long images = 0;
  // Host-side input preparation on one CPU thread (JPEG decode + resize), used when a run models
  // its input pipeline: seconds per image = host_s_per_image + host_s_per_mpixel · (H·W / 10⁶),
  // H×W being the model's input size.
  double host_s_per_image = 0.0;
  double host_s_per_mpixel = 0.0;
  double host_s_per_batch = 0.0;  // fixed host cost of a batch in the pipeline (e.g. re-creating an iterator)
  // Variable-length samples (sentences, utterances) padded to the longest of their batch: a
  // training step's work per sample grows as 1 + padding_growth · ln(batch), the expected longest
  // of a batch growing about logarithmically with its size. 0 for fixed-size inputs (images).
  double padding_growth = 0.0;
};

// Whether the host's per-image input preparation is part of a batch, and how.
enum class PipelineMode {
  none,        // inputs are ready (default): the GPU is the bottleneck
  serial,      // decode, then compute (the BatchDVFS TF1 harness: the GPU idles while the CPU decodes)
  overlapped,  // the next batch is decoded while this one computes
};

struct InputPipeline {
  PipelineMode mode = PipelineMode::none;
  double seconds_per_image = 0.0;
  double seconds_per_batch = 0.0;
};

[[nodiscard]] const char* to_string(PipelineMode mode);
// "none", "serial" or "overlapped"; throws Error(usage).
[[nodiscard]] PipelineMode parse_pipeline_mode(std::string_view text);

// Host seconds per image for a dataset and a model's input size.
[[nodiscard]] double host_seconds_per_image(const DatasetSpec& dataset, const ModelSpec& model);

}  // namespace gpucap::sim
