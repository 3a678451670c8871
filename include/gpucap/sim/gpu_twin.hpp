#pragma once
// The GPU twin: one simulated GPU running one model, in virtual time. It holds the controls a
// driver would hold (locked clocks, power limit), runs batches through the performance/power
// model, emulates the firmware power limiter, and feeds the true power to its sensor.

#include <cstdint>
#include <optional>
#include <set>

#include "gpucap/sim/mps_model.hpp"
#include "gpucap/sim/noise.hpp"
#include "gpucap/sim/perf_model.hpp"
#include "gpucap/sim/power_sensor.hpp"
#include "gpucap/sim/spawned_sampler.hpp"
#include "gpucap/sim/specs.hpp"

namespace gpucap::sim {

struct BatchRecord {
  int batch_size = 0;
  double start_s = 0.0;
  double end_s = 0.0;
  double sm_clock_mhz = 0.0;       // effective clock (after the power limiter)
  double memory_clock_mhz = 0.0;
  double prep_power_w = 0.0;
  double busy_power_w = 0.0;
  double host_s = 0.0;             // host-side input preparation that kept the GPU idle
  double autotune_s = 0.0;         // the engine benchmarking algorithms for a batch size it had not seen
  double stall_s = 0.0;            // stalled by the processes of a spawned nvidia-smi sampler
  bool power_limited = false;      // the firmware lowered the clock for this batch
  int tenant = 0;                  // which MPS tenant ran it (run_tenants); 0 for run_batch
  [[nodiscard]] double latency_s() const { return end_s - start_s; }
};

class GpuTwin {
 public:
  GpuTwin(GpuSpec gpu, ModelSpec model, Precision precision, std::uint64_t seed,
          InputPipeline pipeline = InputPipeline{});

  [[nodiscard]] const GpuSpec& gpu() const { return gpu_; }
  [[nodiscard]] const ModelSpec& model() const { return model_; }
  [[nodiscard]] Precision precision() const { return precision_; }
  [[nodiscard]] const InputPipeline& pipeline() const { return pipeline_; }
  // An engine that autotunes per input shape (TF1 + cuDNN, PyTorch with cudnn.benchmark): the
  // first batch of each batch size costs extra GPU time (sim::autotune_s).
  void set_autotune_new_shapes(bool on) { autotune_new_shapes_ = on; }
  [[nodiscard]] bool autotune_new_shapes() const { return autotune_new_shapes_; }
  // A harness that samples power by spawning nvidia-smi (sim/spawned_sampler.hpp): each process
  // that starts while a batch runs (run_batch) stalls it. nullopt: no such sampler (default).
  // Throws Error(usage) for impossible timings (check_spawned_sampler).
  void set_spawned_sampler(std::optional<SpawnedSampler> sampler);
  [[nodiscard]] const std::optional<SpawnedSampler>& spawned_sampler() const { return spawned_sampler_; }
  // The SM clock the boost governor holds while no lock is set (nullopt: the boost clock). A
  // real GPU may settle lower (thermals, board policy): a replay of a run whose nvidia-smi log
  // shows it sets that clock here. Snaps to the nearest supported clock.
  void set_governor_sm_clock(std::optional<double> mhz);
  [[nodiscard]] double governor_sm_clock_mhz() const { return governor_sm_mhz_.value_or(gpu_.boost_clock_mhz); }

  // Controls. nullopt = not locked / driver default. Values must already be validated against
  // the ranges; clocks snap to the nearest supported clock, as the driver does.
  void lock_sm_clock(std::optional<double> mhz);
  void lock_memory_clock(std::optional<double> mhz);
  void set_power_limit(std::optional<double> watts);
  [[nodiscard]] std::optional<double> sm_clock_lock_mhz() const { return sm_lock_mhz_; }
  [[nodiscard]] std::optional<double> memory_clock_lock_mhz() const { return memory_lock_mhz_; }
  [[nodiscard]] double power_limit_w() const { return power_limit_w_.value_or(gpu_.power_limit_default_w); }
  [[nodiscard]] bool power_limit_set() const { return power_limit_w_.has_value(); }

  // Runs one batch now; advances virtual time by its latency.
  BatchRecord run_batch(int batch_size);
  // Runs MPS tenants (sim/mps_model.hpp), each back to back, until the next batch of any of them
  // finishes, and advances virtual time to that moment. The board power follows which tenants'
  // kernels run at each instant. A change of the shares (or of one process at 100 % to tenants
  // and back) restarts the worker processes: gpu.mps_restart_s idle, in-flight batches lost.
  // A change of batch sizes or clocks takes effect at each tenant's next batch.
  // Throws Error(usage) for an invalid partition (check_mps_tenants).
  BatchRecord run_tenants(const std::vector<MpsTenant>& tenants);
  // Advances virtual time with the model loaded and nothing running.
  void idle(double seconds);

  [[nodiscard]] double now_s() const { return now_s_; }
  [[nodiscard]] double energy_j() const { return energy_j_; }
  [[nodiscard]] double current_power_w() const { return current_power_w_; }
  [[nodiscard]] double sm_clock_mhz() const { return current_sm_mhz_; }
  [[nodiscard]] double memory_clock_mhz() const;
  [[nodiscard]] double utilization() const { return utilization_; }  // busy share of the last batch
  [[nodiscard]] PowerSensor& sensor() { return sensor_; }

 private:
  [[nodiscard]] double requested_sm_clock_mhz() const;
  void emit(double duration_s, double power_w);

  // The noise-free part of a batch: a pure function of the batch size, the requested clocks and
  // the power limit. Runs repeat one configuration batch after batch, so the last one is kept.
  struct BatchModel {
    int batch_size = 0;
    OperatingPoint requested;
    std::optional<double> power_limit_w;
    OperatingPoint point;  // after the power limit
    BatchProfile profile;
    BusyHalves halves;
    double prep_power_w = 0.0;
  };
  [[nodiscard]] const BatchModel& batch_model(int batch_size, OperatingPoint requested);
  std::optional<BatchModel> last_batch_model_;

  // MPS tenants (run_tenants): the noise-free model of the current partition and what each
  // tenant has in flight.
  struct MpsModel {
    std::vector<MpsTenant> tenants;
    OperatingPoint requested;
    std::optional<double> power_limit_w;
    OperatingPoint point;  // after the power limit
    MpsProfile profile;
    double idle_w = 0.0;
    std::vector<double> busy_w;  // what each tenant adds while its kernels run
  };
  struct InFlight {
    int batch = 0;
    double start_s = 0.0;
    double kernels_from_s = 0.0;  // end of the batch's preparation
    double end_s = 0.0;
    double busy_w = 0.0;
  };
  [[nodiscard]] const MpsModel& mps_model(const std::vector<MpsTenant>& tenants, OperatingPoint requested);
  void restart_processes_if_partition_changed(const std::vector<MpsTenant>& tenants);
  void start_tenant_batch(std::size_t tenant, double start_s);
  void advance_tenants_to(double end_s);
  std::optional<MpsModel> mps_model_;
  std::vector<MpsTenant> mps_tenants_;  // empty: one process at 100 % (run_batch)
  std::vector<InFlight> in_flight_;
  bool single_process_ran_ = false;

  GpuSpec gpu_;
  ModelSpec model_;
  Precision precision_;
  InputPipeline pipeline_;
  bool autotune_new_shapes_ = false;
  std::optional<SpawnedSampler> spawned_sampler_;
  std::set<int> tuned_batch_sizes_;
  PowerSensor sensor_;
  Noise latency_noise_;
  std::optional<double> sm_lock_mhz_;
  std::optional<double> governor_sm_mhz_;
  std::optional<double> memory_lock_mhz_;
  std::optional<double> power_limit_w_;
  double now_s_ = 0.0;
  double energy_j_ = 0.0;
  double current_power_w_ = 0.0;
  double current_sm_mhz_ = 0.0;
  double utilization_ = 0.0;
};

}  // namespace gpucap::sim
