// The discrete-event scheduler of `gpucap share` (sched/simulator.hpp): jobs, devices and the four
// policies, in virtual time. Every decision is taken at an event (an arrival, the end of a host
// stage, of a kernel, of a state transfer, of a shared device's work), so a run is exactly
// reproducible: ties are broken by the order the events were scheduled in.

#include "gpucap/sched/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>

#include "gpucap/core/error.hpp"

namespace gpucap::sched {

const char* to_string(Policy policy) {
  switch (policy) {
    case Policy::switchflow: return "switchflow";
    case Policy::threads: return "threads";
    case Policy::timeslice: return "timeslice";
    case Policy::mps: return "mps";
  }
  return "?";
}

std::vector<Policy> all_policies() { return {Policy::switchflow, Policy::threads, Policy::timeslice, Policy::mps}; }

Policy parse_policy(const std::string& name) {
  for (const auto policy : all_policies()) {
    if (name == to_string(policy)) return policy;
  }
  throw usage_error(fmt::format("--policy '{}': expected switchflow, threads, timeslice or mps", name));
}

std::vector<double> StepModel::clock_levels_mhz(const DeviceInfo& /*device*/) const { return {}; }

ClockScaling StepModel::clock_scaling(const DeviceInfo& /*device*/, Mode /*mode*/, double /*clock_mhz*/) const { return {}; }

double StepProfile::device_s() const {
  double total = 0.0;
  for (const double k : kernels_s) total += std::max(k, launch_s);
  return total;
}

CapFigures cap_figures(const ShareScenario& scenario, const ShareResult& result) {
  CapFigures f;
  if (!scenario.cap) return f;
  for (const auto& w : result.windows) {
    if (w.cap_w <= 0.0) continue;
    ++f.windows;
    if (w.mean_power_w <= w.cap_w) continue;
    ++f.over;
    f.max_over_w = std::max(f.max_over_w, w.mean_power_w - w.cap_w);
    bool after_step = false;
    for (const auto& step : scenario.cap->steps()) {
      if (step.time_s <= 0.0) continue;
      const bool straddles = w.start_s < step.time_s && w.end_s > step.time_s;
      const bool next = w.start_s >= step.time_s - 1e-9 && w.start_s < step.time_s + scenario.window_s - 1e-9;
      after_step = after_step || straddles || next;
    }
    if (!after_step) ++f.over_outside_steps;
  }
  return f;
}

std::optional<double> slo_attainment(const JobSpec& spec, const JobOutcome& job) {
  if (!spec.slo_ms || job.latencies_s.empty()) return std::nullopt;
  const auto on_time =
      std::count_if(job.latencies_s.begin(), job.latencies_s.end(), [&](double s) { return s * 1e3 <= *spec.slo_ms; });
  return static_cast<double>(on_time) / static_cast<double>(job.latencies_s.size());
}

double nearest_rank_percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

namespace {

constexpr int kGpu = 0;
constexpr int kLpu = 1;
constexpr int kNone = -1;

// How a device hands out its time.
enum class Discipline {
  exclusive,  // a stream that one job at a time may launch into (switchflow's executors; timeslice)
  stream,     // a stream every job launches into at once (threads)
  sharing,    // all jobs' work at once, each at min(1, capacity / n) of its own speed (MPS, the CPU)
};

enum class Phase { not_arrived, transferring, waiting_slot, host, waiting_device, device, done };

enum class EventKind { arrive, host_done, launch, kernel_done, transfer_done, sharing_done, request_due, window, cap_change };

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
  bool preempted = false;              // told to stop launching; its launched kernels drain
  bool suspended = false;              // preempted mid-step, to go on from its next kernel
  double request_issue_s = 0.0;        // when the current step (request) first started
  double measured_from_s = 0.0;        // the end of its warm-up steps (its arrival without any)
  std::int64_t measured_items = 0;
  double remaining_s = 0.0;            // sharing devices: work left at full speed
  std::optional<std::size_t> preemption_to_time;   // its ask preempted someone: time its first kernel
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
  std::uint64_t kernel_token = 0;
  std::vector<int> active;             // sharing: jobs with work on it
  std::uint64_t token = 0;             // sharing: changes whenever `active` does
  double last_update_s = 0.0;
  double power_w = 0.0;
  DeviceEnergy energy;
};

class Simulation {
 public:
  Simulation(const ShareScenario& scenario, const StepModel& model) : scenario_(scenario), model_(model) {
    devices_.push_back(make_device(scenario.gpu, /*is_lpu=*/false));
    if (scenario.lpu && scenario.policy == Policy::switchflow) devices_.push_back(make_device(*scenario.lpu, true));
    for (const auto& job : scenario.jobs) {
      Run run;
      run.spec = &job;
      run.current = job;
      run.outcome.name = job.name;
      run.outcome.start_s = job.start_s;
      runs_.push_back(std::move(run));
    }
    for (int j = 0; j < static_cast<int>(runs_.size()); ++j) schedule(run_at(j).spec->start_s, EventKind::arrive, j, kNone, 0);
    knobs_ = scenario.knobs;
    if (scenario.cap || scenario.controller) {
      if (!(scenario.window_s > 0.0)) throw usage_error("the power window must be > 0 s");
      schedule(scenario.window_s, EventKind::window, kNone, kNone, 0);
    }
    if (scenario.cap) {
      for (const auto& step : scenario.cap->steps()) {
        if (step.time_s > 0.0) schedule(step.time_s, EventKind::cap_change, kNone, kNone, 0);
      }
    }
  }

  ShareResult run() {
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      if (e.at_s > scenario_.max_time_s) break;
      advance_to(e.at_s);
      handle(e);
    }
    return finish();
  }

 private:
  Device make_device(const DeviceInfo& info, bool is_lpu) const {
    Device d;
    d.info = info;
    d.energy.id = info.id;
    d.power_w = info.idle_power_w;
    if (info.kind == DeviceKind::cpu) {
      d.discipline = Discipline::sharing;  // the restricted pool, shared by the jobs on it
    } else if (scenario_.policy == Policy::threads) {
      d.discipline = Discipline::stream;
    } else if (scenario_.policy == Policy::mps) {
      d.discipline = Discipline::sharing;
      d.capacity = model_.mps_capacity();
    } else {
      d.discipline = Discipline::exclusive;
      d.preemptive = scenario_.policy == Policy::switchflow && !is_lpu;
    }
    return d;
  }

  Run& run_at(int j) { return runs_[static_cast<std::size_t>(j)]; }
  const Run& run_at(int j) const { return runs_[static_cast<std::size_t>(j)]; }
  Device& device_at(int d) { return devices_[static_cast<std::size_t>(d)]; }
  const Device& device_at(int d) const { return devices_[static_cast<std::size_t>(d)]; }

  // --- events ---

  void schedule(double at_s, EventKind kind, int job, int device, std::uint64_t token) {
    events_.push(Event{at_s, next_sequence_++, kind, job, device, token});
  }

  void handle(const Event& e) {
    switch (e.kind) {
      case EventKind::arrive: arrive(e.job); break;
      case EventKind::host_done:
        if (run_at(e.job).token == e.token) host_done(e.job);
        break;
      case EventKind::transfer_done:
      case EventKind::request_due:
        if (run_at(e.job).token == e.token) start_step(e.job);
        break;
      case EventKind::launch:
        if (run_at(e.job).token == e.token) {
          run_at(e.job).launch_pending = false;
          launch_kernel(e.job);
        }
        break;
      case EventKind::kernel_done:
        if (device_at(e.device).kernel_token == e.token) kernel_done(e.device);
        break;
      case EventKind::sharing_done:
        if (device_at(e.device).token == e.token) sharing_done(e.device);
        break;
      case EventKind::window: close_window(); break;
      case EventKind::cap_change: consult_controller(); break;
    }
  }

  void advance_to(double t) {
    now_ = t;
    for (auto& d : devices_) account(d);
  }

  void account(Device& d) {
    const double dt = now_ - d.last_update_s;
    if (dt > 0.0) {
      d.energy.energy_j += d.power_w * dt;
      if (d.power_w > d.info.idle_power_w) d.energy.busy_s += dt;
    }
    d.last_update_s = now_;
  }

  // --- jobs ---

  bool live(const Run& r) const { return r.phase != Phase::not_arrived && r.phase != Phase::done; }

  bool ended(const std::string& name) const {
    for (const auto& r : runs_) {
      if (r.spec->name == name) return r.phase == Phase::done;
    }
    return false;
  }

  bool higher_priority_live(int j) const {
    for (int k = 0; k < static_cast<int>(runs_.size()); ++k) {
      if (k != j && live(run_at(k)) && run_at(k).spec->priority > run_at(j).spec->priority) return true;
    }
    return false;
  }

  std::int64_t length_steps(const JobSpec& spec) const {
    if (spec.steps) return *spec.steps;
    if (spec.requests) return *spec.requests;
    return std::numeric_limits<std::int64_t>::max();
  }

  void arrive(int j) {
    Run& r = run_at(j);
    r.phase = Phase::waiting_slot;  // not yet placed
    r.measured_from_s = now_;
    r.profile = model_.step(*r.spec, device_at(kGpu).info, 0);
    if (!fits_on_arrival(j)) {
      consult_controller();
      return;
    }
    consult_controller();
    start_step(j);
  }

  // The memory check when a job arrives; false when it (or, under threads, the process) died.
  bool fits_on_arrival(int j) {
    const double capacity = device_at(kGpu).info.memory_bytes;
    if (device_at(kGpu).info.kind == DeviceKind::cpu || capacity <= 0.0) return true;
    double need = 0.0;
    double largest_activation = 0.0;
    for (int k = 0; k < static_cast<int>(runs_.size()); ++k) {
      const Run& r = run_at(k);
      if (!live(r) || r.device != kGpu) continue;
      const StepProfile p = k == j ? r.profile : model_.step(*r.spec, device_at(kGpu).info, 0);
      switch (scenario_.policy) {
        case Policy::threads: need += p.persistent_bytes + p.activation_bytes; break;
        case Policy::mps: need += p.persistent_bytes + p.activation_bytes + model_.process_overhead_bytes(device_at(kGpu).info); break;
        case Policy::switchflow:
        case Policy::timeslice:
          need += p.persistent_bytes;
          if (scenario_.resume_preempted) {
            need += p.activation_bytes;  // a suspended step keeps its activations on the GPU
          } else {
            largest_activation = std::max(largest_activation, p.activation_bytes);
          }
          break;
      }
    }
    if (need + largest_activation <= capacity) return true;
    if (scenario_.policy == Policy::threads) {
      for (int k = 0; k < static_cast<int>(runs_.size()); ++k) {
        if (live(run_at(k))) end_job(k, /*out_of_memory=*/true);
      }
    } else {
      end_job(j, /*out_of_memory=*/true);
    }
    return false;
  }

  // A step boundary: the job ends, moves, or starts its next step.
  void start_step(int j) {
    Run& r = run_at(j);
    if (r.outcome.steps_done >= length_steps(*r.spec) ||
        (r.spec->duration_s && now_ >= r.spec->start_s + *r.spec->duration_s) || (r.spec->until && ended(*r.spec->until))) {
      end_job(j, false);
      return;
    }
    if (r.spec->rate_per_s && !r.input_ready) {  // open loop: request `step` arrives on its schedule
      const double due = r.spec->start_s + static_cast<double>(r.step) / *r.spec->rate_per_s;
      if (now_ < due) {
        r.phase = Phase::waiting_slot;
        schedule(due, EventKind::request_due, j, kNone, ++r.token);
        return;
      }
    }
    if (const auto target = migration_target(j)) {
      migrate(j, *target);
      return;
    }
    load_profile(r);
    if (!r.input_ready) {
      r.request_issue_s = r.spec->rate_per_s ? r.spec->start_s + static_cast<double>(r.step) / *r.spec->rate_per_s : now_;
    }
    if (scenario_.policy == Policy::timeslice) {
      ask_device(j);  // the slot covers the host stage too
      return;
    }
    begin_host_stage(j);
  }

  std::optional<int> migration_target(int j) const {
    if (devices_.size() < 2) return std::nullopt;
    const Run& r = run_at(j);
    const bool away = higher_priority_live(j);
    if (away && r.device == kGpu && lpu_has_room(j)) return kLpu;
    if (!away && r.device == kLpu) return kGpu;
    return std::nullopt;
  }

  bool lpu_has_room(int j) const {
    const Device& lpu = device_at(kLpu);
    if (lpu.info.kind == DeviceKind::cpu || lpu.info.memory_bytes <= 0.0) return true;
    double persistent = 0.0;
    double largest_activation = 0.0;
    for (int k = 0; k < static_cast<int>(runs_.size()); ++k) {
      if (!(k == j || (live(run_at(k)) && run_at(k).device == kLpu))) continue;
      const StepProfile p = model_.step(*run_at(k).spec, lpu.info, 0);
      persistent += p.persistent_bytes;
      largest_activation = std::max(largest_activation, p.activation_bytes);
    }
    return persistent + largest_activation <= lpu.info.memory_bytes;
  }

  void migrate(int j, int target) {
    Run& r = run_at(j);
    const auto& from = device_at(r.device).info;
    const auto& to = device_at(target).info;
    const StepProfile p = model_.step(*r.spec, from, r.step);
    Migration m{now_, r.spec->name, from.id, to.id, p.state_bytes, p.state_variables, model_.transfer_s(*r.spec, from, to)};
    if (target == kLpu && r.preemption_to_move) {
      auto& pre = preemptions_[*r.preemption_to_move];
      pre.state_bytes = m.state_bytes;
      pre.state_variables = m.state_variables;
      pre.transfer_s = m.transfer_s;
    }
    r.preemption_to_move.reset();
    migrations_.push_back(m);
    ++r.outcome.migrations;
    r.device = target;
    r.phase = Phase::transferring;
    schedule(now_ + m.transfer_s, EventKind::transfer_done, j, kNone, ++r.token);
  }

  // The step's profile on the job's device, with the batch size and launch window the knobs give
  // it (a redone step keeps the batch it started with).
  void load_profile(Run& r) {
    if (!r.input_ready) {
      const auto batch = knobs_.batch_size.find(r.spec->name);
      r.current.batch_size = batch != knobs_.batch_size.end() ? batch->second : r.spec->batch_size;
    }
    r.profile = model_.step(r.current, device_at(r.device).info, r.step);
    const auto window = knobs_.launch_window.find(r.spec->name);
    if (window != knobs_.launch_window.end()) r.profile.launch_window = window->second;
  }

  ClockScaling scaling_for(const Run& r, const Device& d) const {
    if (knobs_.gpu_clock_mhz <= 0.0 || d.info.kind != DeviceKind::gpu || &d != &devices_.front()) return {};
    return model_.clock_scaling(d.info, r.spec->mode, knobs_.gpu_clock_mhz);
  }

  double busy_power(const Run& r, const Device& d) const {
    return d.info.idle_power_w + (r.profile.busy_power_w - d.info.idle_power_w) * scaling_for(r, d).dynamic_power;
  }

  // Host work of every job runs slower while a job computes on the CPU device.
  double host_factor(int j) const {
    for (const auto& d : devices_) {
      if (d.info.kind != DeviceKind::cpu) continue;
      for (const int k : d.active) {
        if (k != j) return 1.0 + model_.host_slowdown_with_cpu_job();
      }
    }
    return 1.0;
  }

  void begin_host_stage(int j) {
    Run& r = run_at(j);
    if (r.input_ready) {
      host_done(j);
      return;
    }
    r.phase = Phase::host;
    schedule(now_ + r.profile.host_s * host_factor(j), EventKind::host_done, j, kNone, ++r.token);
  }

  void host_done(int j) {
    Run& r = run_at(j);
    r.input_ready = true;
    if (scenario_.policy == Policy::timeslice) {
      start_kernels(j);  // it already holds the slot
      return;
    }
    ask_device(j);
  }

  void step_done(int j) {
    Run& r = run_at(j);
    r.input_ready = false;
    ++r.outcome.steps_done;
    if (r.device == kLpu) ++r.outcome.steps_on_lpu;
    const bool measured = r.outcome.steps_done > r.spec->warmup;
    r.outcome.items_done += r.current.batch_size;
    if (measured) r.measured_items += r.current.batch_size;
    if (r.spec->mode == Mode::inference && measured) r.outcome.latencies_s.push_back(now_ - r.request_issue_s);
    if (r.outcome.steps_done == r.spec->warmup) r.measured_from_s = now_;
    if (scenario_.record_steps) steps_.push_back({r.spec->name, r.step, device_at(r.device).info.id, r.request_issue_s, now_});
    r.outcome.end_s = now_;
    ++r.step;
    start_step(j);
  }

  void end_job(int j, bool out_of_memory) {
    Run& r = run_at(j);
    if (r.phase == Phase::done) return;
    leave_device(j);
    r.phase = Phase::done;
    ++r.token;
    r.outcome.out_of_memory = out_of_memory;
    r.outcome.finished = !out_of_memory;
    r.outcome.end_s = now_;
    consult_controller();
    // Jobs of lower priority waiting on the LPU come back at their next step; jobs waiting for a
    // device the ended job held are served by leave_device.
  }

  // Takes a job that ends off whatever device queue, stream or slot it is in (its kernel in flight,
  // if it died of out-of-memory, runs out and is ignored).
  void leave_device(int j) {
    Run& r = run_at(j);
    Device& d = device_at(r.device);
    d.waiting.erase(std::remove(d.waiting.begin(), d.waiting.end(), j), d.waiting.end());
    d.stream.erase(std::remove(d.stream.begin(), d.stream.end(), j), d.stream.end());  // a process that died
    if (d.discipline == Discipline::sharing) {
      if (std::find(d.active.begin(), d.active.end(), j) != d.active.end()) {
        update_sharing(d);
        d.active.erase(std::remove(d.active.begin(), d.active.end(), j), d.active.end());
        reschedule_sharing(r.device);
      }
    } else if (d.owner == j) {
      d.owner = kNone;
      serve_next(r.device);
    }
  }

  // --- devices ---

  void set_power(Device& d, double watts) {
    account(d);
    d.power_w = watts;
  }

  void ask_device(int j) {
    Run& r = run_at(j);
    Device& d = device_at(r.device);
    r.phase = scenario_.policy == Policy::timeslice && !r.input_ready ? Phase::waiting_slot : Phase::waiting_device;
    switch (d.discipline) {
      case Discipline::exclusive:
        if (d.owner == kNone) {
          grant(r.device, j);
        } else {
          enqueue_by_priority(d, j);
          if (d.preemptive && run_at(d.owner).spec->priority < r.spec->priority) preempt(r.device, j);
        }
        break;
      case Discipline::stream: start_kernels(j); break;
      case Discipline::sharing:
        r.phase = Phase::device;
        update_sharing(d);
        r.remaining_s = r.profile.device_s() * scaling_for(r, d).time;
        d.active.push_back(j);
        reschedule_sharing(r.device);
        break;
    }
  }

  // Highest priority first, then the earliest ask (the queue keeps ask order within a priority).
  void enqueue_by_priority(Device& d, int j) {
    const int priority = run_at(j).spec->priority;
    auto it = std::find_if(d.waiting.begin(), d.waiting.end(), [&](int k) { return run_at(k).spec->priority < priority; });
    d.waiting.insert(it, j);
  }

  void preempt(int device, int asker) {
    Device& d = device_at(device);
    Run& owner = run_at(d.owner);
    if (owner.preempted || owner.phase != Phase::device) return;  // timeslice owners are never preempted
    owner.preempted = true;
    Preemption p;
    p.at_s = now_;
    p.by = run_at(asker).spec->name;
    p.victim = owner.spec->name;
    preemptions_.push_back(p);
    run_at(asker).preemption_to_time = preemptions_.size() - 1;
    owner.preemption_to_move = preemptions_.size() - 1;
    if (owner.completed == owner.launched) drained(device, d.owner);  // nothing of it in the stream
  }

  void grant(int device, int j) {
    Device& d = device_at(device);
    d.owner = j;
    Run& r = run_at(j);
    if (scenario_.policy == Policy::timeslice && !r.input_ready) {
      r.phase = Phase::host;
      schedule(now_ + r.profile.host_s * host_factor(j), EventKind::host_done, j, kNone, ++r.token);
      return;
    }
    start_kernels(j);
  }

  void start_kernels(int j) {
    Run& r = run_at(j);
    r.phase = Phase::device;
    if (r.suspended) {  // resume where the preemption stopped it: every launched kernel has run
      r.suspended = false;
    } else {
      r.launched = r.started = r.completed = 0;
    }
    r.preempted = false;
    r.launch_pending = false;
    r.last_launch_s = now_;
    if (r.profile.kernels_s.empty()) {  // nothing on the device: the step is its host stage
      finish_device_stage(r.device, j);
      return;
    }
    try_launch(j);
  }

  // Launches the job's next kernel now or schedules it, unless its window is full, it waits at a
  // sync point, it was preempted or it launched them all; kernel_done tries again.
  void try_launch(int j) {
    Run& r = run_at(j);
    const std::size_t total = r.profile.kernels_s.size();
    if (r.launch_pending || r.preempted || r.launched >= total) return;
    const auto window = static_cast<std::size_t>(std::max(0, r.profile.launch_window));
    if (window > 0 && r.launched - r.completed >= window) return;
    const auto sync = static_cast<std::size_t>(std::max(0, r.profile.sync_every));
    if (sync > 0 && r.launched > 0 && r.launched % sync == 0 && r.completed < r.launched) return;
    r.launch_pending = true;
    const double at = std::max(now_, r.last_launch_s + r.profile.launch_s * host_factor(j));
    schedule(at, EventKind::launch, j, kNone, r.token);
  }

  void launch_kernel(int j) {
    Run& r = run_at(j);
    if (r.preempted || r.phase != Phase::device) return;
    Device& d = device_at(r.device);
    ++r.launched;
    r.last_launch_s = now_;
    d.stream.push_back(j);
    if (d.running == kNone) start_next_kernel(r.device);
    try_launch(j);
  }

  void start_next_kernel(int device) {
    Device& d = device_at(device);
    if (d.running != kNone || d.stream.empty()) return;
    const int j = d.stream.front();
    d.stream.pop_front();
    Run& r = run_at(j);
    if (r.preemption_to_time) {
      preemptions_[*r.preemption_to_time].latency_s = now_ - preemptions_[*r.preemption_to_time].at_s;
      r.preemption_to_time.reset();
    }
    d.running = j;
    set_power(d, busy_power(r, d));
    const double duration = r.profile.kernels_s[r.started++] * scaling_for(r, d).time;
    schedule(now_ + duration, EventKind::kernel_done, kNone, device, ++d.kernel_token);
  }

  void kernel_done(int device) {
    Device& d = device_at(device);
    const int j = d.running;
    d.running = kNone;
    set_power(d, d.info.idle_power_w);
    Run& r = run_at(j);
    if (r.phase == Phase::done) {
      start_next_kernel(device);
      return;
    }
    ++r.completed;
    if (r.completed == r.profile.kernels_s.size()) {
      finish_device_stage(device, j);
    } else if (r.preempted && r.completed == r.launched) {
      drained(device, j);
    } else {
      try_launch(j);
    }
    start_next_kernel(device);
  }

  // A preempted job's launched kernels have all run: it gives the GPU up and will redo its step
  // (keeping the input its host stage prepared).
  //
  // With resume_preempted (gpucap's mode), a job that is not about to move keeps its place in
  // the step instead: it waits for the GPU again and goes on from its next kernel.
  void drained(int device, int j) {
    Run& r = run_at(j);
    Device& d = device_at(device);
    record_drain(r);
    r.preempted = false;
    ++r.token;  // its pending launch, if any, is void
    r.launch_pending = false;
    d.owner = kNone;
    serve_next(device);
    if (scenario_.resume_preempted && !migration_target(j)) {
      ++r.outcome.steps_suspended;
      r.suspended = true;
      r.phase = Phase::waiting_device;
      if (d.owner == kNone) {
        grant(device, j);
      } else {
        enqueue_by_priority(d, j);
      }
      return;
    }
    ++r.outcome.steps_redone;
    start_step(j);
  }

  // The preempted job's launched kernels have all run: the drain ends now.
  void record_drain(const Run& r) {
    if (r.preemption_to_move) preemptions_[*r.preemption_to_move].drain_s = now_ - preemptions_[*r.preemption_to_move].at_s;
  }

  // The waiting jobs are served before this one asks again (timeslice's round robin). A job
  // preempted while its last kernels ran completes its step: nothing is redone.
  void finish_device_stage(int device, int j) {
    Device& d = device_at(device);
    if (run_at(j).preempted) record_drain(run_at(j));
    run_at(j).preempted = false;
    if (d.owner == j) {
      d.owner = kNone;
      serve_next(device);
    }
    step_done(j);
  }

  void serve_next(int device) {
    Device& d = device_at(device);
    if (d.owner != kNone || d.waiting.empty()) return;
    const int j = d.waiting.front();
    d.waiting.pop_front();
    grant(device, j);
  }

  // Sharing devices: bring every active job's remaining work up to now.
  void update_sharing(Device& d) {
    const double elapsed = now_ - sharing_since_[static_cast<std::size_t>(&d - devices_.data())];
    const double rate = sharing_rate(d);
    for (const int k : d.active) run_at(k).remaining_s = std::max(0.0, run_at(k).remaining_s - elapsed * rate);
    sharing_since_[static_cast<std::size_t>(&d - devices_.data())] = now_;
  }

  double sharing_rate(const Device& d) const {
    if (d.active.empty()) return 0.0;
    return std::min(1.0, d.capacity / static_cast<double>(d.active.size()));
  }

  void reschedule_sharing(int device) {
    Device& d = device_at(device);
    sharing_since_[static_cast<std::size_t>(device)] = now_;
    ++d.token;
    double watts = d.info.idle_power_w;
    const double rate = sharing_rate(d);
    double soonest = std::numeric_limits<double>::infinity();
    for (const int k : d.active) {
      watts += rate * (busy_power(run_at(k), d) - d.info.idle_power_w);
      soonest = std::min(soonest, run_at(k).remaining_s / rate);
    }
    if (d.info.max_power_w > 0.0) watts = std::min(watts, d.info.max_power_w);
    set_power(d, watts);
    if (!d.active.empty()) schedule(now_ + soonest, EventKind::sharing_done, kNone, device, d.token);
  }

  void sharing_done(int device) {
    Device& d = device_at(device);
    update_sharing(d);
    std::vector<int> finished;
    for (const int k : d.active) {
      if (run_at(k).remaining_s <= 1e-9) finished.push_back(k);
    }
    for (const int k : finished) d.active.erase(std::remove(d.active.begin(), d.active.end(), k), d.active.end());
    reschedule_sharing(device);
    for (const int k : finished) step_done(k);
  }

  // --- power windows and the controller ---

  double cap_now() const { return scenario_.cap ? scenario_.cap->cap_at(now_) : 0.0; }

  bool any_job_pending() const {
    return std::any_of(runs_.begin(), runs_.end(), [](const Run& r) { return r.phase != Phase::done; });
  }

  void close_window() {
    Device& gpu = device_at(kGpu);
    account(gpu);
    ShareWindow w;
    w.start_s = window_start_s_;
    w.end_s = now_;
    w.mean_power_w = (gpu.energy.energy_j - window_start_energy_j_) / (now_ - window_start_s_);
    w.cap_w = scenario_.cap ? scenario_.cap->cap_at(window_start_s_) : 0.0;
    windows_.push_back(w);
    window_start_s_ = now_;
    window_start_energy_j_ = gpu.energy.energy_j;
    consult_controller();
    if (any_job_pending()) schedule(now_ + scenario_.window_s, EventKind::window, kNone, kNone, 0);
  }

  void consult_controller() {
    if (scenario_.controller == nullptr) return;
    ShareObservation o;
    o.now_s = now_;
    o.cap_w = cap_now();
    if (!windows_.empty()) o.last_window = windows_.back();
    for (const auto& r : runs_) o.jobs.push_back({r.spec->name, r.spec->mode, r.spec->priority, live(r), r.current.batch_size});
    o.knobs = knobs_;
    auto next = scenario_.controller->decide(o);
    if (next == knobs_) return;
    knobs_ = std::move(next);
    knob_changes_.emplace_back(now_, knobs_);
    // A launch window is the runtime's own policy: it applies at once, to the step in progress.
    for (auto& r : runs_) {
      const auto window = knobs_.launch_window.find(r.spec->name);
      if (window != knobs_.launch_window.end() && r.phase == Phase::device) r.profile.launch_window = window->second;
    }
  }

  // --- results ---

  ShareResult finish() {
    const double end = std::min(now_, scenario_.max_time_s);
    ShareResult result;
    for (auto& r : runs_) {
      if (live(r)) {
        r.outcome.end_s = end;
        r.outcome.finished = false;
      }
      const double span = r.outcome.end_s - r.measured_from_s;
      if (span > 0.0) r.outcome.throughput_items_s = static_cast<double>(r.measured_items) / span;
      result.makespan_s = std::max(result.makespan_s, r.outcome.end_s);
      result.jobs.push_back(r.outcome);
    }
    for (auto& d : devices_) {
      account(d);
      result.devices.push_back(d.energy);
    }
    result.preemptions = preemptions_;
    result.migrations = migrations_;
    result.steps = std::move(steps_);
    result.windows = std::move(windows_);
    result.knob_changes = std::move(knob_changes_);
    return result;
  }

  const ShareScenario& scenario_;
  const StepModel& model_;
  std::vector<Device> devices_;
  std::vector<Run> runs_;
  std::vector<Preemption> preemptions_;
  std::vector<Migration> migrations_;
  std::vector<StepRecord> steps_;
  std::vector<ShareWindow> windows_;
  std::vector<std::pair<double, ShareKnobs>> knob_changes_;
  ShareKnobs knobs_;
  double window_start_s_ = 0.0;
  double window_start_energy_j_ = 0.0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t next_sequence_ = 0;
  double now_ = 0.0;
  std::array<double, 2> sharing_since_{0.0, 0.0};
};

void check_scenario(const ShareScenario& s) {
  check_jobs(s.jobs);
  if (s.gpu.kind != DeviceKind::gpu) throw usage_error(fmt::format("--gpu {} is not a GPU", s.gpu.id));
  if (s.lpu && s.lpu->id == s.gpu.id) {
    throw usage_error(fmt::format("--lpu {} is the shared GPU itself: give another GPU, or cpu", s.lpu->id));
  }
  if (!(s.max_time_s > 0.0)) throw usage_error("the time limit must be > 0");
}

}  // namespace

ShareResult simulate_share(const ShareScenario& scenario, const StepModel& model) {
  check_scenario(scenario);
  return Simulation(scenario, model).run();
}

}  // namespace gpucap::sched
