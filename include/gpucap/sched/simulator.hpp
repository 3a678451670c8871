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
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/sched/job.hpp"
#include "gpucap/sched/latency_record.hpp"
#include "gpucap/sched/step_model.hpp"

namespace gpucap::sched {

enum class Policy { switchflow, threads, timeslice, mps };

[[nodiscard]] const char* to_string(Policy policy);
[[nodiscard]] Policy parse_policy(const std::string& name);  // Error(usage)
[[nodiscard]] std::vector<Policy> all_policies();

// What a controller may turn while jobs run.
struct ShareKnobs {
  double gpu_clock_mhz = 0.0;                 // 0: the GPU's own clock
  std::map<std::string, int> batch_size;      // per job, from its next step; absent: its spec's
  std::map<std::string, int> launch_window;   // per job, from its next step: kernels it may keep
                                              // launched on a GPU (the drain of a preemption)

  bool operator==(const ShareKnobs&) const = default;
};

// One power window of the shared GPU.
struct ShareWindow {
  double start_s = 0.0;
  double end_s = 0.0;
  double mean_power_w = 0.0;
  double cap_w = 0.0;                         // 0 without a cap
};

struct ShareJobView {
  std::string name;
  Mode mode = Mode::training;
  int priority = priority_low;
  bool live = false;                          // arrived and not ended
  int batch_size = 0;                         // the one it runs with now
};

// What a controller sees: at every window's end, when a job arrives or ends, when the cap changes.
struct ShareObservation {
  double now_s = 0.0;
  double cap_w = 0.0;
  std::optional<ShareWindow> last_window;
  std::vector<ShareJobView> jobs;
  ShareKnobs knobs;                           // in force now
};

class ShareController {
 public:
  virtual ~ShareController() = default;
  ShareController() = default;
  ShareController(const ShareController&) = delete;
  ShareController& operator=(const ShareController&) = delete;
  [[nodiscard]] virtual ShareKnobs decide(const ShareObservation& observation) = 0;
};

// What an observer sees at the end of each power window (exporters: `gpucap share --metrics`).
struct ShareProgress {
  ShareWindow window;
  ShareKnobs knobs;                           // in force now
  std::vector<ShareJobView> jobs;
  std::vector<std::int64_t> items_done;       // per job, since the start
  std::int64_t preemptions = 0;               // since the start
  double gpu_energy_j = 0.0;                  // the shared GPU, since the start
  double gpu_busy_s = 0.0;
};

// Watches a simulation from its clock: it may sleep in on_time (pacing to the wall clock) and
// read each window, but changes nothing: the results are the same with or without one. Without a
// cap or a controller its windows are computed between the simulation's events (never scheduled
// as events, never recorded in ShareResult::windows), and the last one ends with the last event.
class ShareObserver {
 public:
  virtual ~ShareObserver() = default;
  ShareObserver() = default;
  ShareObserver(const ShareObserver&) = delete;
  ShareObserver& operator=(const ShareObserver&) = delete;
  // Virtual time is about to move on to `now_s`.
  virtual void on_time(double now_s) = 0;
  virtual void on_window(const ShareProgress& progress) = 0;
};

struct StepRecord;

// Gets every completed step as it completes (`gpucap share --trace` writes them out as they come,
// keeping none). Not copied: the simulation keeps a pointer.
class StepSink {
 public:
  virtual ~StepSink() = default;
  StepSink() = default;
  StepSink(const StepSink&) = delete;
  StepSink& operator=(const StepSink&) = delete;
  virtual void on_step(const StepRecord& step) = 0;
};

// Preemptions and migrations a result lists in full (the first ones); the others are counted, and
// the preemptions' latencies all go into ShareResult::preemption_latencies. So a run of 10^8
// requests does not keep 10^8 records.
inline constexpr std::size_t kListedEvents = 1000;

struct ShareScenario {
  DeviceInfo gpu;                      // the shared GPU (SwitchFlow's HPU)
  std::optional<DeviceInfo> lpu;       // where a preempted job goes (switchflow only)
  std::vector<JobSpec> jobs;
  Policy policy = Policy::switchflow;
  double max_time_s = 3600.0;          // virtual time limit: jobs still running then are cut short
  bool record_steps = false;          // every step in ShareResult::steps (memory grows with them)
  StepSink* step_sink = nullptr;      // every step as it completes, none kept (not owned)
  std::optional<CapSchedule> cap;      // on the shared GPU's power, judged per window
  double window_s = 0.1;               // power windows (recorded when there is a cap or a controller)
  ShareKnobs knobs;                    // from the start
  ShareController* controller = nullptr;  // may change the knobs (not owned)
  ShareObserver* observer = nullptr;      // sees time and windows (not owned); changes no result
  // switchflow: a preempted job that stays on the GPU resumes its step from the next kernel
  // instead of redoing it (gpucap's own runtime can; TensorFlow's executor could not). Its
  // working memory then stays on the GPU beside the others'.
  bool resume_preempted = false;
};

struct JobOutcome {
  std::string name;
  bool out_of_memory = false;
  bool finished = false;               // ran its length (false: cut by max_time_s, or OOM)
  std::int64_t steps_done = 0;         // steps (training) or requests (inference) completed
  std::int64_t items_done = 0;         // images (or sentences) of those steps
  std::int64_t steps_redone = 0;       // steps interrupted by a preemption and run again
  std::int64_t steps_suspended = 0;    // preemptions it resumed from (resume_preempted)
  std::int64_t steps_on_lpu = 0;
  double start_s = 0.0;                // arrival
  double end_s = 0.0;                  // last step's end (or the OOM, or the cut)
  double throughput_items_s = 0.0;     // batch × steps measured / (end − end of the warm-up, or start)
  // Inference: each measured request, issue → result, in bounded memory (exact up to
  // LatencyRecord::kExactSamples requests); counts those within the spec's slo_ms.
  LatencyRecord latencies;
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
  std::vector<Preemption> preemptions; // the first kListedEvents, in order
  std::int64_t preemption_count = 0;   // all of them
  LatencyRecord preemption_latencies;  // of all of them (0 for one whose asker never ran a kernel)
  std::vector<Migration> migrations;   // the first kListedEvents, in order
  std::int64_t migration_count = 0;    // all of them
  std::vector<DeviceEnergy> devices;   // the GPU, then the LPU if any
  std::vector<StepRecord> steps;       // only with ShareScenario::record_steps
  std::vector<ShareWindow> windows;    // with a cap or a controller
  std::vector<std::pair<double, ShareKnobs>> knob_changes;  // when the controller changed them
  double makespan_s = 0.0;
};

// Runs the scenario to its end in virtual time. Error(usage) for a bad scenario (an LPU the
// policy cannot use is ignored, an LPU that is the GPU itself is refused).
[[nodiscard]] ShareResult simulate_share(const ShareScenario& scenario, const StepModel& model);

// Under a cap: the windows over it. Those that start within one window after a cap step (or
// straddle it) are counted apart: a controller needs one window to see the new cap.
struct CapFigures {
  int windows = 0;
  int over = 0;
  int over_outside_steps = 0;
  double max_over_w = 0.0;
};
[[nodiscard]] CapFigures cap_figures(const ShareScenario& scenario, const ShareResult& result);

// The share of a job's measured requests within its slo_ms; nullopt without one or no requests.
// Exact: the record counts them as they come (Error(internal) for a folded record made without
// the spec's slo_ms).
[[nodiscard]] std::optional<double> slo_attainment(const JobSpec& spec, const JobOutcome& job);

// Nearest-rank percentile (p in (0, 100]) of `values`, which need not be sorted; 0 for none.
[[nodiscard]] double nearest_rank_percentile(std::vector<double> values, double p);

}  // namespace gpucap::sched
