#pragma once
// The share twin's data files (data/sched/: calibration.json, models.json, devices.json) as read
// into memory, checked field by field. Internal to src/sim/: share_twin.cpp computes with them.

#include <map>
#include <string>

#include "gpucap/sim/share_twin.hpp"

namespace gpucap::sim {

inline constexpr const char* kNmt = "nmt_wmt16";
inline constexpr int kCalibratedBatch = 32;  // the batch of every training figure
inline constexpr int kInferBatch = 128;      // the batch of Fig. 3's inference figures

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
  // The CPUs a preempted job may move to, by device id ("cpu": the paper's servers'). A CPU's
  // figures are a GPU's times x slowdown, or measured BS-32 training steps of its own.
  struct Cpu {
    std::string relative_to;  // "": only the steps of train_step_s
    double slowdown = 1.0;
    std::map<std::string, double> train_step_s;
    int job_threads = 1;  // threads a job moved there computes on (what contends with the host)
  };
  std::map<std::string, Cpu> cpus;
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

// Each reader: Error(invalid_data) naming the file and the field for a malformed file, Error(io)
// for a missing one.
ShareTwin::Calibration read_share_calibration(const std::string& file);
// `input_size`: the input the twin feeds every model.
std::map<std::string, ShareModelFacts> read_share_models(const std::string& file, int input_size);
std::map<std::string, ShareDeviceFacts> read_share_devices(const std::string& file);

}  // namespace gpucap::sim
