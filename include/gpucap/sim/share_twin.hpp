#pragma once
// The twin of SwitchFlow's experiments (Middleware'21): how long a step of a Keras model (or the
// NMT decoder) takes on a GTX 1080 Ti, RTX 2080 Ti, V100 or the host CPU, kernel by kernel, how
// much memory it needs, what its state weighs and how long moving it takes, and what the device
// draws. Read from data/sched/ (models.json: model facts; devices.json: device facts;
// calibration.json: timings set from the paper's figures). docs/simulator.md names the source of
// every parameter and what was checked against the paper instead.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpucap/sched/step_model.hpp"

namespace gpucap::sim {

struct ShareModelFacts {
  std::string id;
  std::string name;
  int input_size = 224;
  double params_total = 0.0;
  double params_trainable = 0.0;
  int variables_total = 0;      // weight tensors, BN statistics included
  int variables_trainable = 0;  // of which trainable (each gets a momentum slot)
  double train_activation_bytes_per_image = 0.0;
  double infer_activation_bytes_per_image = 0.0;
  int kernels_per_train_step = 0;
  int kernels_per_inference = 0;
  double gmacs_per_image = 0.0;  // at the twin's input size (0: not known)
};

struct ShareDeviceFacts {
  sched::DeviceInfo info;
  std::string name;
  int cores = 0;     // a CPU's
  std::string host;  // a GPU's machine's CPU (its device id): where a CPU LPU is
};

class ShareTwin final : public sched::StepModel {
 public:
  // Reads DATA_DIR/sched/{models,devices,calibration}.json; Error(invalid_data) naming the file
  // and the field for a malformed one, Error(io) for a missing one. `seed` draws the step-to-step
  // variation of kernel times.
  explicit ShareTwin(const std::string& data_dir, std::uint64_t seed = 1);

  // "rtx2080ti", "gtx1080ti", "v100", "h200", "cpu" (the paper's servers'), "h200_host"; Error(usage)
  // listing the known ones.
  [[nodiscard]] sched::DeviceInfo device(const std::string& id) const;
  // Where switchflow moves a job preempted on GPU `gpu`: "cpu" is that GPU's machine's CPU (the
  // paper's servers' for theirs, h200_host for the h200); another id is that device, and Error(usage)
  // for the CPU of another machine.
  [[nodiscard]] sched::DeviceInfo lpu_device(const std::string& lpu, const std::string& gpu) const;
  // The board's name ("NVIDIA GeForce RTX 2080 Ti"), as NVML would give it; Error(usage).
  [[nodiscard]] std::string device_name(const std::string& id) const;
  [[nodiscard]] std::vector<std::string> device_ids() const;
  [[nodiscard]] std::vector<std::string> model_ids() const;
  [[nodiscard]] const ShareModelFacts& model(const std::string& id) const;  // Error(usage)

  // Error(usage) when the twin cannot run `job` on `device` (unknown model, no figures for it).
  void check(const sched::JobSpec& job, const sched::DeviceInfo& device) const;

  [[nodiscard]] sched::StepProfile step(const sched::JobSpec& job, const sched::DeviceInfo& device,
                                        std::int64_t step) const override;
  [[nodiscard]] double transfer_s(const sched::JobSpec& job, const sched::DeviceInfo& from,
                                  const sched::DeviceInfo& to) const override;
  [[nodiscard]] double host_slowdown_with_cpu_jobs(const sched::DeviceInfo& cpu, int jobs) const override;
  [[nodiscard]] double process_overhead_bytes(const sched::DeviceInfo& device) const override;
  [[nodiscard]] double mps_capacity() const override;
  [[nodiscard]] double input_pipelines_at_once() const override;
  [[nodiscard]] int stream_queue_depth() const override;
  [[nodiscard]] std::vector<double> clock_levels_mhz(const sched::DeviceInfo& device) const override;
  [[nodiscard]] sched::ClockScaling clock_scaling(const sched::DeviceInfo& device, sched::Mode mode,
                                                  double clock_mhz) const override;

  // The device stage of one step alone (no jitter), seconds: for reports and tests.
  [[nodiscard]] double device_stage_s(const sched::JobSpec& job, const sched::DeviceInfo& device) const;

  struct Calibration;

 private:
  std::map<std::string, ShareModelFacts> models_;
  std::map<std::string, ShareDeviceFacts> devices_;
  std::shared_ptr<const Calibration> calibration_;
  std::uint64_t seed_ = 1;

  // A step's kernels before its jitter, and its host's dispatch (ShareTwin::step).
  struct Feed {
    std::vector<double> kernels_s;
    double launch_s = 0.0;
    int sync_every = 0;
  };
  const Feed& feed_for(const sched::JobSpec& job, const sched::DeviceInfo& device) const;
  mutable std::mutex feeds_mutex_;
  mutable std::map<std::string, Feed> feeds_;  // by model, mode, batch and device; never erased
};

}  // namespace gpucap::sim
