// The jobs' side of the share simulation (simulation.hpp).

#include "simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpucap/core/error.hpp"

namespace gpucap::sched::detail {

Simulation::Simulation(const ShareScenario& scenario, const StepModel& model) : scenario_(scenario), model_(model) {
  devices_.push_back(make_device(scenario.gpu, /*is_lpu=*/false));
  if (scenario.lpu && scenario.policy == Policy::switchflow) devices_.push_back(make_device(*scenario.lpu, true));
  for (const auto& job : scenario.jobs) {
    Run run;
    run.spec = &job;
    run.current = job;
    run.outcome.name = job.name;
    run.outcome.start_s = job.start_s;
    run.outcome.latencies = LatencyRecord(job.slo_ms);
    runs_.push_back(std::move(run));
  }
  for (int j = 0; j < static_cast<int>(runs_.size()); ++j) schedule(run_at(j).spec->start_s, EventKind::arrive, j, kNone, 0);
  knobs_ = scenario.knobs;
  host_.info = DeviceInfo{"host", DeviceKind::cpu, 0.0, 0.0, 0.0};
  host_.discipline = Discipline::sharing;
  host_.capacity = model.input_pipelines_at_once();
  if (scenario.cap || scenario.controller || scenario.observer) {
    if (!(scenario.window_s > 0.0)) throw usage_error("the power window must be > 0 s");
  }
  if (scenario.cap || scenario.controller) {
    schedule(scenario.window_s, EventKind::window, kNone, kNone, 0);
  } else {
    observer_windows_ = scenario.observer != nullptr;
  }
  if (scenario.cap) {
    for (const auto& step : scenario.cap->steps()) {
      if (step.time_s > 0.0) schedule(step.time_s, EventKind::cap_change, kNone, kNone, 0);
    }
  }
}

ShareResult Simulation::run() {
  while (!events_.empty()) {
    const Event e = events_.top();
    events_.pop();
    if (e.at_s > scenario_.max_time_s) break;
    if (scenario_.observer != nullptr) {
      observe_until(e.at_s);
      scenario_.observer->on_time(e.at_s);
    }
    advance_to(e.at_s);
    handle(e);
  }
  // The observer's last window ends with the last event (the end of the last job), not after it.
  if (observer_windows_ && now_ > observed_until_s_) observe_window(now_);
  return finish();
}

Device Simulation::make_device(const DeviceInfo& info, bool is_lpu) const {
  Device d;
  d.info = info;
  d.energy.id = info.id;
  d.power_w = info.idle_power_w;
  if (info.kind == DeviceKind::cpu) {
    d.discipline = Discipline::sharing;  // the restricted pool, shared by the jobs on it
  } else if (scenario_.policy == Policy::threads) {
    d.discipline = Discipline::stream;
    d.queue_depth = model_.stream_queue_depth();
  } else if (scenario_.policy == Policy::mps) {
    d.discipline = Discipline::sharing;
    d.capacity = model_.mps_capacity();
  } else {
    d.discipline = Discipline::exclusive;
    d.queue_depth = model_.stream_queue_depth();
    d.preemptive = scenario_.policy == Policy::switchflow && !is_lpu;
  }
  return d;
}

void Simulation::schedule(double at_s, EventKind kind, int job, int device, std::uint64_t token) {
  events_.push(Event{at_s, next_sequence_++, kind, job, device, token});
}

void Simulation::handle(const Event& e) {
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
    case EventKind::device_gap_done:
      if (run_at(e.job).token == e.token) finish_device_stage(e.device, e.job);
      break;
    case EventKind::sharing_done:
      if (device_at(e.device).token == e.token) sharing_done(e.device);
      break;
    case EventKind::window: close_window(); break;
    case EventKind::cap_change: consult_controller(); break;
  }
}

void Simulation::advance_to(double t) {
  now_ = t;
  for (auto& d : devices_) account(d);
}

void Simulation::account(Device& d) {
  const double dt = now_ - d.last_update_s;
  if (dt > 0.0) {
    d.energy.energy_j += d.power_w * dt;
    if (d.power_w > d.info.idle_power_w) d.energy.busy_s += dt;
  }
  d.last_update_s = now_;
}

bool Simulation::ended(const std::string& name) const {
  for (const auto& r : runs_) {
    if (r.spec->name == name) return r.phase == Phase::done;
  }
  return false;
}

bool Simulation::higher_priority_live(int j) const {
  for (int k = 0; k < static_cast<int>(runs_.size()); ++k) {
    if (k != j && live(run_at(k)) && run_at(k).spec->priority > run_at(j).spec->priority) return true;
  }
  return false;
}

std::int64_t Simulation::length_steps(const JobSpec& spec) const {
  if (spec.steps) return *spec.steps;
  if (spec.requests) return *spec.requests;
  return std::numeric_limits<std::int64_t>::max();
}

void Simulation::arrive(int j) {
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
bool Simulation::fits_on_arrival(int j) {
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
void Simulation::start_step(int j) {
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

std::optional<int> Simulation::migration_target(int j) const {
  if (devices_.size() < 2) return std::nullopt;
  const Run& r = run_at(j);
  const bool away = higher_priority_live(j);
  if (away && r.device == kGpu && lpu_has_room(j)) return kLpu;
  if (!away && r.device == kLpu) return kGpu;
  return std::nullopt;
}

bool Simulation::lpu_has_room(int j) const {
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

void Simulation::migrate(int j, int target) {
  Run& r = run_at(j);
  const auto& from = device_at(r.device).info;
  const auto& to = device_at(target).info;
  const StepProfile p = model_.step(*r.spec, from, r.step);
  Migration m{now_, r.spec->name, from.id, to.id, p.state_bytes, p.state_variables, model_.transfer_s(*r.spec, from, to)};
  if (target == kLpu && r.preemption_to_move) {
    if (auto* pre = listed_preemption(*r.preemption_to_move)) {
      pre->state_bytes = m.state_bytes;
      pre->state_variables = m.state_variables;
      pre->transfer_s = m.transfer_s;
    }
  }
  r.preemption_to_move.reset();
  if (static_cast<std::size_t>(migration_count_++) < kListedEvents) migrations_.push_back(m);
  ++r.outcome.migrations;
  r.device = target;
  r.phase = Phase::transferring;
  schedule(now_ + m.transfer_s, EventKind::transfer_done, j, kNone, ++r.token);
}

// The step's profile on the job's device, with the batch size and launch window the knobs give
// it (a redone step keeps the batch it started with).
void Simulation::load_profile(Run& r) {
  if (!r.input_ready) {
    const auto batch = knobs_.batch_size.find(r.spec->name);
    r.current.batch_size = batch != knobs_.batch_size.end() ? batch->second : r.spec->batch_size;
  }
  r.profile = model_.step(r.current, device_at(r.device).info, r.step);
  const auto window = knobs_.launch_window.find(r.spec->name);
  if (window != knobs_.launch_window.end()) r.profile.launch_window = window->second;
}

ClockScaling Simulation::scaling_for(const Run& r, const Device& d) const {
  if (knobs_.gpu_clock_mhz <= 0.0 || d.info.kind != DeviceKind::gpu || &d != &devices_.front()) return {};
  return model_.clock_scaling(d.info, r.spec->mode, knobs_.gpu_clock_mhz);
}

double Simulation::busy_power(const Run& r, const Device& d) const {
  return d.info.idle_power_w + (r.profile.busy_power_w - d.info.idle_power_w) * scaling_for(r, d).dynamic_power;
}

// Host work of every job may run slower while other jobs compute on the CPU device.
double Simulation::host_factor(int j) const {
  for (const auto& d : devices_) {
    if (d.info.kind != DeviceKind::cpu) continue;
    const auto others = static_cast<int>(std::count_if(d.active.begin(), d.active.end(), [j](int k) { return k != j; }));
    if (others > 0) return 1.0 + model_.host_slowdown_with_cpu_jobs(d.info, others);
  }
  return 1.0;
}

void Simulation::begin_host_stage(int j) {
  Run& r = run_at(j);
  if (r.input_ready) {
    host_done(j);
    return;
  }
  if (r.spec->reuse_input) {
    join_input_group(j);
    return;
  }
  start_host_work(j);
}

// Input reuse: a member waits until every live member of its group has come to its next batch;
// the last to come runs the one pipeline for them all (lock step).
void Simulation::join_input_group(int j) {
  Run& r = run_at(j);
  r.phase = Phase::waiting_slot;
  r.awaiting_group_input = true;
  maybe_start_group_pipeline(*r.spec->reuse_input);
}

void Simulation::maybe_start_group_pipeline(const std::string& group) {
  int last = kNone;
  for (int k = 0; k < static_cast<int>(runs_.size()); ++k) {
    const Run& m = run_at(k);
    if (!m.spec->reuse_input || *m.spec->reuse_input != group || m.phase == Phase::done) continue;
    if (m.group_leader) return;                         // its pipeline is already running
    if (!m.awaiting_group_input) return;                // a member is still busy with its batch
    last = k;
  }
  if (last == kNone) return;
  // The pipeline makes one batch for all: it costs what the dearest member's own pipeline would
  // (e.g. InceptionV3's 299 × 299 images beside ResNet50's 224 × 224).
  double host_s = 0.0;
  for (int k = 0; k < static_cast<int>(runs_.size()); ++k) {
    const Run& m = run_at(k);
    if (m.awaiting_group_input && *m.spec->reuse_input == group) host_s = std::max(host_s, m.profile.host_s * host_factor(k));
  }
  run_at(last).group_leader = true;
  start_host_work(last, host_s);
}

// The host stage: a timed stage, or — for an input pipeline when the model says how many the
// host runs at once — work on the host's shared cores (each of n at min(1, at_once / n) speed).
void Simulation::start_host_work(int j, std::optional<double> seconds_override) {
  Run& r = run_at(j);
  r.phase = Phase::host;
  const double seconds = seconds_override ? *seconds_override : r.profile.host_s * host_factor(j);
  if (!r.profile.input_pipeline || host_.capacity <= 0.0) {
    schedule(now_ + seconds, EventKind::host_done, j, kNone, ++r.token);
    return;
  }
  ++r.token;
  update_sharing(host_);
  r.remaining_s = seconds;
  host_.active.push_back(j);
  reschedule_sharing(kHost);
}

void Simulation::host_done(int j) {
  Run& r = run_at(j);
  if (r.group_leader) {  // the group's shared pipeline is done: every member's batch is ready
    r.group_leader = false;
    r.awaiting_group_input = false;
    for (int k = 0; k < static_cast<int>(runs_.size()); ++k) {
      Run& m = run_at(k);
      if (k == j || !m.awaiting_group_input || *m.spec->reuse_input != *r.spec->reuse_input) continue;
      m.awaiting_group_input = false;
      host_done(k);
    }
  }
  r.input_ready = true;
  if (scenario_.policy == Policy::timeslice) {
    start_kernels(j);  // it already holds the slot
    return;
  }
  ask_device(j);
}

void Simulation::step_done(int j) {
  Run& r = run_at(j);
  r.input_ready = false;
  ++r.outcome.steps_done;
  if (r.device == kLpu) ++r.outcome.steps_on_lpu;
  const bool measured = r.outcome.steps_done > r.spec->warmup;
  r.outcome.items_done += r.current.batch_size;
  if (measured) r.measured_items += r.current.batch_size;
  if (r.spec->mode == Mode::inference && measured) r.outcome.latencies.add(now_ - r.request_issue_s);
  if (r.outcome.steps_done == r.spec->warmup) r.measured_from_s = now_;
  if (scenario_.record_steps || scenario_.step_sink != nullptr) {
    StepRecord record{r.spec->name, r.step, device_at(r.device).info.id, r.request_issue_s, now_};
    if (scenario_.step_sink != nullptr) scenario_.step_sink->on_step(record);
    if (scenario_.record_steps) steps_.push_back(std::move(record));
  }
  r.outcome.end_s = now_;
  ++r.step;
  start_step(j);
}

void Simulation::end_job(int j, bool out_of_memory) {
  Run& r = run_at(j);
  if (r.phase == Phase::done) return;
  leave_device(j);
  r.phase = Phase::done;
  ++r.token;
  r.outcome.out_of_memory = out_of_memory;
  r.outcome.finished = !out_of_memory;
  r.outcome.end_s = now_;
  r.awaiting_group_input = false;
  if (r.spec->reuse_input) maybe_start_group_pipeline(*r.spec->reuse_input);  // the others may all be waiting
  consult_controller();
  // Jobs of lower priority waiting on the LPU come back at their next step; jobs waiting for a
  // device the ended job held are served by leave_device.
}

// Takes a job that ends off whatever device queue, stream or slot it is in (its kernel in flight,
// if it died of out-of-memory, runs out and is ignored).
void Simulation::leave_device(int j) {
  Run& r = run_at(j);
  if (std::find(host_.active.begin(), host_.active.end(), j) != host_.active.end()) {
    update_sharing(host_);
    host_.active.erase(std::remove(host_.active.begin(), host_.active.end(), j), host_.active.end());
    reschedule_sharing(kHost);
  }
  Device& d = device_at(r.device);
  d.waiting.erase(std::remove(d.waiting.begin(), d.waiting.end(), j), d.waiting.end());
  // A process that died: its queued kernels never run. They count as finished for the barriers,
  // which may then open a kernel or two early for a job still waiting (none does today: under
  // threads an out-of-memory death ends every job of the process at once).
  const auto queued = static_cast<std::uint64_t>(std::count(d.stream.begin(), d.stream.end(), j));
  d.stream.erase(std::remove(d.stream.begin(), d.stream.end(), j), d.stream.end());
  d.kernels_finished += queued;
  leave_stream_queues(d, j);
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

bool Simulation::any_job_pending() const {
  return std::any_of(runs_.begin(), runs_.end(), [](const Run& r) { return r.phase != Phase::done; });
}

void Simulation::close_window() {
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
  if (scenario_.observer != nullptr) scenario_.observer->on_window(progress(w));
  consult_controller();
  if (any_job_pending()) schedule(now_ + scenario_.window_s, EventKind::window, kNone, kNone, 0);
}

ShareProgress Simulation::progress(const ShareWindow& window) const {
  ShareProgress p;
  p.window = window;
  p.knobs = knobs_;
  for (const auto& r : runs_) {
    p.jobs.push_back({r.spec->name, r.spec->mode, r.spec->priority, live(r), r.current.batch_size});
    p.items_done.push_back(r.outcome.items_done);
  }
  p.preemptions = preemption_count_;
  const Device& gpu = device_at(kGpu);
  p.gpu_energy_j = gpu.energy.energy_j;
  p.gpu_busy_s = gpu.energy.busy_s;
  return p;
}

void Simulation::observe_until(double t) {
  if (!observer_windows_) return;
  while (observed_until_s_ + scenario_.window_s <= t) observe_window(observed_until_s_ + scenario_.window_s);
}

void Simulation::observe_window(double end_s) {
  const Device& gpu = device_at(kGpu);
  // The GPU's power is constant since its last accounting (the last event, before end_s).
  const double since_s = std::max(0.0, end_s - gpu.last_update_s);
  const double energy_j = gpu.energy.energy_j + gpu.power_w * since_s;
  ShareWindow w;
  w.start_s = observed_until_s_;
  w.end_s = end_s;
  w.mean_power_w = (energy_j - observed_energy_j_) / (end_s - observed_until_s_);
  auto p = progress(w);
  p.gpu_energy_j = energy_j;
  if (gpu.power_w > gpu.info.idle_power_w) p.gpu_busy_s += since_s;
  observed_until_s_ = end_s;
  observed_energy_j_ = energy_j;
  scenario_.observer->on_time(end_s);
  scenario_.observer->on_window(p);
}

void Simulation::consult_controller() {
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

Preemption* Simulation::listed_preemption(std::size_t number) {
  return number < preemptions_.size() ? &preemptions_[number] : nullptr;
}

void Simulation::time_preemption(Run& asker, double latency_s) {
  if (auto* p = listed_preemption(*asker.preemption_to_time)) {
    p->latency_s = latency_s;  // joins preemption_latencies_ at the end, with the others listed
  } else {
    preemption_latencies_.add(latency_s);
  }
  asker.preemption_to_time.reset();
}

ShareResult Simulation::finish() {
  const double end = std::min(now_, scenario_.max_time_s);
  ShareResult result;
  // A preemption whose asker never ran a kernel keeps latency 0 (as a listed one does).
  for (auto& r : runs_) {
    if (r.preemption_to_time && !listed_preemption(*r.preemption_to_time)) time_preemption(r, 0.0);
  }
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
  result.preemption_count = preemption_count_;
  result.preemption_latencies = std::move(preemption_latencies_);
  for (const auto& p : preemptions_) result.preemption_latencies.add(p.latency_s);
  result.preemptions = std::move(preemptions_);
  result.migration_count = migration_count_;
  result.migrations = std::move(migrations_);
  result.steps = std::move(steps_);
  result.windows = std::move(windows_);
  result.knob_changes = std::move(knob_changes_);
  return result;
}

}  // namespace gpucap::sched::detail
