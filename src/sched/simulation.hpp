#pragma once
// The discrete-event simulation behind sched::simulate_share (internal to src/sched): jobs, devices and
// their events. simulation_jobs.cpp holds the jobs' side (arrivals, steps, moves, memory, power
// windows, the controller, results), simulation_devices.cpp the devices' (the exclusive and shared
// streams, preemption, drains, MPS and CPU sharing).

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "gpucap/sched/simulator.hpp"

namespace gpucap::sched::detail {

constexpr int kGpu = 0;
constexpr int kLpu = 1;
constexpr int kNone = -1;
constexpr int kHost = -2;  // the host's cores, where input pipelines share their time

// How a device hands out its time.
enum class Discipline {
  exclusive,  // a stream that one job at a time may launch into (switchflow's executors; timeslice)
  stream,     // a stream every job launches into at once (threads)
  sharing,    // all jobs' work at once, each at min(1, capacity / n) of its own speed (MPS, the CPU)
};

enum class Phase { not_arrived, transferring, waiting_slot, host, waiting_device, device, done };

enum class EventKind { arrive, host_done, launch, kernel_done, device_gap_done, transfer_done, sharing_done, request_due, window, cap_change };

struct Event {
  double at_s = 0.0;
  std::uint64_t sequence = 0;
  EventKind kind = EventKind::arrive;
  int job = kNone;
  int device = kNone;
  std::uint64_t token = 0;  // the job's or device's token when scheduled; stale if it changed since

  bool operator>(const Event& other) const {
    return at_s != other.at_s ? at_s > other.at_s : sequence > other.sequence;
  }
};

struct Run {
  const JobSpec* spec = nullptr;
  JobSpec current;                     // the spec with the batch size the knobs give it now
  Phase phase = Phase::not_arrived;
  int device = kGpu;
  std::uint64_t token = 0;
  std::int64_t step = 0;               // the step being run (= steps done so far)
  StepProfile profile;                 // of `step` on `device`
  bool input_ready = false;            // a redone step keeps the input its host stage prepared
  // The device stage on a stream: kernels launched, started and completed so far.
  std::size_t launched = 0;
  std::size_t started = 0;
  std::size_t completed = 0;
  double last_launch_s = 0.0;
  bool launch_pending = false;         // a launch event is scheduled
  bool launch_blocked = false;         // its launch waits for room in the stream's launch queue
  bool at_barrier = false;             // its device stage waits for the stream to run what is queued
  bool preempted = false;              // told to stop launching; its launched kernels drain
  bool suspended = false;              // preempted mid-step, to go on from its next kernel
  bool awaiting_group_input = false;   // input reuse: waiting for the group's shared pipeline
  bool group_leader = false;           // input reuse: runs the group's pipeline for this batch
  double request_issue_s = 0.0;        // when the current step (request) first started
  double measured_from_s = 0.0;        // the end of its warm-up steps (its arrival without any)
  std::int64_t measured_items = 0;
  double remaining_s = 0.0;            // sharing devices: work left at full speed
  // Preemptions by number (the first kListedEvents are listed in full, the others only timed).
  std::optional<std::size_t> preemption_to_time;   // its ask preempted someone: time its first kernel
  double preemption_asked_s = 0.0;                 // when that ask was
  std::optional<std::size_t> preemption_to_move;   // it was preempted: record its next move
  JobOutcome outcome;
};

struct Device {
  DeviceInfo info;
  Discipline discipline = Discipline::exclusive;
  double capacity = 1.0;               // sharing devices
  bool preemptive = false;             // exclusive devices: a higher priority preempts the owner
  int owner = kNone;                   // exclusive: the job allowed to launch into it
  std::deque<int> waiting;             // exclusive: asked and waiting, in the order they are served
  std::deque<int> stream;              // streams: the job of each launched kernel not yet started
  int running = kNone;                 // streams: the job whose kernel runs
  int queue_depth = 0;                 // streams: kernels the launch queue holds, running included (0: no limit)
  std::deque<int> blocked;             // streams: jobs whose launch waits for room, in the order they blocked
  std::uint64_t kernels_entered = 0;   // streams: kernels launched into it so far
  std::uint64_t kernels_finished = 0;  // streams: of those, run to the end or dropped with a job that died
  // Streams: jobs waiting until the stream has run every kernel launched before they asked
  // (kernels_finished reaches the number), in the order they asked.
  std::deque<std::pair<std::uint64_t, int>> barrier;
  std::uint64_t kernel_token = 0;
  std::vector<int> active;             // sharing: jobs with work on it
  std::uint64_t token = 0;             // sharing: changes whenever `active` does
  double last_update_s = 0.0;
  double sharing_since_s = 0.0;        // sharing: remaining work is up to date at this time
  double power_w = 0.0;
  DeviceEnergy energy;
};

class Simulation {
 public:
  Simulation(const ShareScenario& scenario, const StepModel& model);

  ShareResult run();

 private:
  Device make_device(const DeviceInfo& info, bool is_lpu) const;

  Run& run_at(int j) { return runs_[static_cast<std::size_t>(j)]; }
  const Run& run_at(int j) const { return runs_[static_cast<std::size_t>(j)]; }
  Device& device_at(int d) { return d == kHost ? host_ : devices_[static_cast<std::size_t>(d)]; }
  const Device& device_at(int d) const { return d == kHost ? host_ : devices_[static_cast<std::size_t>(d)]; }

  // --- events ---

  void schedule(double at_s, EventKind kind, int job, int device, std::uint64_t token);

  void handle(const Event& e);

  void advance_to(double t);

  void account(Device& d);

  // --- jobs ---

  bool live(const Run& r) const { return r.phase != Phase::not_arrived && r.phase != Phase::done; }

  bool ended(const std::string& name) const;

  bool higher_priority_live(int j) const;

  std::int64_t length_steps(const JobSpec& spec) const;

  void arrive(int j);

  // The memory check when a job arrives; false when it (or, under threads, the process) died.
  bool fits_on_arrival(int j);

  // A step boundary: the job ends, moves, or starts its next step.
  void start_step(int j);

  std::optional<int> migration_target(int j) const;

  bool lpu_has_room(int j) const;

  void migrate(int j, int target);

  // The step's profile on the job's device, with the batch size and launch window the knobs give
  // it (a redone step keeps the batch it started with).
  void load_profile(Run& r);

  ClockScaling scaling_for(const Run& r, const Device& d) const;

  double busy_power(const Run& r, const Device& d) const;

  // Host work of every job runs slower while a job computes on the CPU device.
  double host_factor(int j) const;
  void start_host_work(int j, std::optional<double> seconds_override = std::nullopt);
  void end_of_kernels(int device, int j);
  void join_input_group(int j);
  void maybe_start_group_pipeline(const std::string& group);

  void begin_host_stage(int j);

  void host_done(int j);

  void step_done(int j);

  void end_job(int j, bool out_of_memory);

  // Takes a job that ends off whatever device queue, stream or slot it is in (its kernel in flight,
  // if it died of out-of-memory, runs out and is ignored).
  void leave_device(int j);

  // --- devices ---

  void set_power(Device& d, double watts);

  void ask_device(int j);

  // Highest priority first, then the earliest ask (the queue keeps ask order within a priority).
  void enqueue_by_priority(Device& d, int j);

  void preempt(int device, int asker);

  void grant(int device, int j);

  void start_kernels(int j);

  // Launches the job's next kernel now or schedules it, unless its window is full, it waits at a
  // sync point, it was preempted or it launched them all; kernel_done tries again.
  void try_launch(int j);

  void launch_kernel(int j);

  // The kernel enters the stream (the launch queue has room).
  void enter_stream(int j);

  static bool queue_full(const Device& d);

  // The job no longer waits for room in the launch queue or at a barrier (a new stage, a drain,
  // the job's end).
  void leave_stream_queues(Device& d, int j);

  // A kernel left the stream: jobs at a barrier it ends go on, then blocked launches enter.
  void stream_advanced(int device);

  // The device stage's first launch, once the stream has run what others queued before it.
  void begin_launching(int j);

  void start_next_kernel(int device);

  void kernel_done(int device);

  // A preempted job's launched kernels have all run: it gives the GPU up and will redo its step
  // (keeping the input its host stage prepared).
  //
  // With resume_preempted (gpucap's mode), a job that is not about to move keeps its place in
  // the step instead: it waits for the GPU again and goes on from its next kernel.
  void drained(int device, int j);

  // The preempted job's launched kernels have all run: the drain ends now.
  void record_drain(const Run& r);

  // The waiting jobs are served before this one asks again (timeslice's round robin). A job
  // preempted while its last kernels ran completes its step: nothing is redone.
  void finish_device_stage(int device, int j);

  void serve_next(int device);

  // Sharing devices: bring every active job's remaining work up to now.
  void update_sharing(Device& d);

  double sharing_rate(const Device& d) const;

  void reschedule_sharing(int device);

  void sharing_done(int device);

  // --- power windows and the controller ---

  double cap_now() const { return scenario_.cap ? scenario_.cap->cap_at(now_) : 0.0; }

  bool any_job_pending() const;

  void close_window();

  void consult_controller();

  // What an observer sees at the end of `window`.
  ShareProgress progress(const ShareWindow& window) const;

  // Without a cap or a controller there are no window events: the observer's windows that end by
  // `t` are computed from the state as it stands (nothing changes between events), so observing
  // never moves the clock, the accounting or the event order.
  void observe_until(double t);
  // The observer's window [observed_until_s_, end_s], the GPU's energy projected to its end.
  void observe_window(double end_s);

  // --- results ---

  // The listed record of preemption `number`, or nullptr past kListedEvents.
  Preemption* listed_preemption(std::size_t number);
  // The asker's first kernel starts (or never will: `latency_s` 0): its preemption is timed.
  void time_preemption(Run& asker, double latency_s);

  ShareResult finish();

  const ShareScenario& scenario_;
  const StepModel& model_;
  std::vector<Device> devices_;
  std::vector<Run> runs_;
  std::vector<Preemption> preemptions_;   // the first kListedEvents
  std::int64_t preemption_count_ = 0;
  LatencyRecord preemption_latencies_;     // of the preemptions past kListedEvents (the listed ones join at the end)
  std::vector<Migration> migrations_;     // the first kListedEvents
  std::int64_t migration_count_ = 0;
  std::vector<StepRecord> steps_;
  std::vector<ShareWindow> windows_;
  std::vector<std::pair<double, ShareKnobs>> knob_changes_;
  ShareKnobs knobs_;
  double window_start_s_ = 0.0;
  double window_start_energy_j_ = 0.0;
  bool observer_windows_ = false;      // an observer without window events (observe_until)
  double observed_until_s_ = 0.0;
  double observed_energy_j_ = 0.0;     // the GPU's, at observed_until_s_
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t next_sequence_ = 0;
  double now_ = 0.0;
  Device host_;  // sharing, capacity: the input pipelines the host runs at full speed at once
};

}  // namespace gpucap::sched::detail
