#pragma once
// Several jobs sharing one GPU (and a low-priority device), in virtual time: SwitchFlow's
// preemptive scheduler and the baselines it was compared with, as policies of one scheduler.
//
// Each step of a job is a CPU stage (host_s) then a device stage. On a GPU the device stage is
// kernels that the job launches into the GPU's one stream (StepProfile: launch rate, launch window,
// sync points); the GPU runs the stream's kernels one at a time, in launch order. Policies:
//  - switchflow: at most one job launches into a GPU at a time (its GPU executor), the waiting
//    ones served by priority, then by the time they asked. A higher-priority job that asks for the
//    GPU preempts the owner: the owner stops launching, the kernels it already launched drain, and
//    its interrupted step is redone. While a job of higher priority is live (arrived, not ended),
//    a lower-priority job starts each step on the low-priority device (LPU) — its persistent state
//    is moved there first — and moves back at its first step after the last one ended. On a CPU
//    LPU, jobs share a restricted pool (they run at 1/n speed each when n are there). Without an
//    LPU the preempted job waits for the GPU instead.
//  - threads: free sharing in one process (multi-threaded TensorFlow): every job launches into the
//    one stream at once, so a job's kernel waits behind whatever the others launched before it.
//    One allocator: if the jobs' memory does not fit together, the process dies of out-of-memory,
//    every job in it.
//  - timeslice: one job's whole step (CPU and GPU stage) at a time, highest priority first, then
//    round robin; no preemption inside a step (Gandiva-like session time slicing).
//  - mps: one process per job under NVIDIA MPS: kernels of different jobs overlap, the GPU giving
//    mps_capacity() times one job's speed in total, shared equally among the jobs with work; each
//    process has its own memory, and a job that does not fit when it starts fails alone.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/sched/job.hpp"
#include "gpucap/sched/step_model.hpp"

namespace gpucap::sched {

enum class Policy { switchflow, threads, timeslice, mps };

[[nodiscard]] const char* to_string(Policy policy);
[[nodiscard]] Policy parse_policy(const std::string& name);  // Error(usage)
[[nodiscard]] std::vector<Policy> all_policies();

struct ShareScenario {
  DeviceInfo gpu;                      // the shared GPU (SwitchFlow's HPU)
  std::optional<DeviceInfo> lpu;       // where a preempted job goes (switchflow only)
  std::vector<JobSpec> jobs;
  Policy policy = Policy::switchflow;
  double max_time_s = 3600.0;          // virtual time limit: jobs still running then are cut short
  bool record_steps = false;
};

struct JobOutcome {
  std::string name;
  bool out_of_memory = false;
  bool finished = false;               // ran its length (false: cut by max_time_s, or OOM)
  std::int64_t steps_done = 0;         // steps (training) or requests (inference) completed
  std::int64_t steps_redone = 0;       // steps interrupted by a preemption and run again
  std::int64_t steps_on_lpu = 0;
  double start_s = 0.0;                // arrival
  double end_s = 0.0;                  // last step's end (or the OOM, or the cut)
  double throughput_items_s = 0.0;     // batch × steps measured / (end − end of the warm-up, or start)
  std::vector<double> latencies_s;     // inference: each measured request, issue → result (closed loop)
  std::int64_t migrations = 0;         // moves to and from the LPU
};

struct Preemption {
  double at_s = 0.0;                   // when the higher-priority job asked for the GPU
  std::string by;                      // the job that asked
  std::string victim;                  // the job whose executor was preempted
  double drain_s = 0.0;                // until the victim's kernel in flight ended
  double latency_s = 0.0;              // ask → the asker's first kernel starts
  // The victim's move to the LPU that followed (at its next step), if it moved.
  double state_bytes = 0.0;
  int state_variables = 0;
  double transfer_s = 0.0;
};

struct Migration {
  double at_s = 0.0;
  std::string job;
  std::string from;
  std::string to;
  double state_bytes = 0.0;
  int state_variables = 0;
  double transfer_s = 0.0;
};

// One completed step, for --trace.
struct StepRecord {
  std::string job;
  std::int64_t step = 0;
  std::string device;   // where it completed
  double start_s = 0.0; // its first start (a redone step keeps it)
  double end_s = 0.0;
};

struct DeviceEnergy {
  std::string id;
  double energy_j = 0.0;
  double busy_s = 0.0;
};

struct ShareResult {
  std::vector<JobOutcome> jobs;        // in the scenario's order
  std::vector<Preemption> preemptions;
  std::vector<Migration> migrations;
  std::vector<DeviceEnergy> devices;   // the GPU, then the LPU if any
  std::vector<StepRecord> steps;       // only when ShareScenario::record_steps
  double makespan_s = 0.0;
};

// Runs the scenario to its end in virtual time. Error(usage) for a bad scenario (an LPU the
// policy cannot use is ignored, an LPU that is the GPU itself is refused).
[[nodiscard]] ShareResult simulate_share(const ShareScenario& scenario, const StepModel& model);

// Nearest-rank percentile (p in (0, 100]) of `values`, which need not be sorted; 0 for none.
[[nodiscard]] double nearest_rank_percentile(std::vector<double> values, double p);

}  // namespace gpucap::sched
