// The devices' side of the share simulation (simulation.hpp): how each discipline hands out its
// time, preemption and drains.

#include "simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpucap/core/error.hpp"

namespace gpucap::sched::detail {

void Simulation::set_power(Device& d, double watts) {
  account(d);
  d.power_w = watts;
}

void Simulation::ask_device(int j) {
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
      r.remaining_s = r.profile.device_s(scaling_for(r, d).time);
      d.active.push_back(j);
      reschedule_sharing(r.device);
      break;
  }
}

// Highest priority first, then the earliest ask (the queue keeps ask order within a priority).
void Simulation::enqueue_by_priority(Device& d, int j) {
  const int priority = run_at(j).spec->priority;
  auto it = std::find_if(d.waiting.begin(), d.waiting.end(), [&](int k) { return run_at(k).spec->priority < priority; });
  d.waiting.insert(it, j);
}

void Simulation::preempt(int device, int asker) {
  Device& d = device_at(device);
  Run& owner = run_at(d.owner);
  if (owner.preempted || owner.phase != Phase::device) return;  // timeslice owners are never preempted
  owner.preempted = true;
  const auto number = static_cast<std::size_t>(preemption_count_++);
  if (number < kListedEvents) {
    Preemption p;
    p.at_s = now_;
    p.by = run_at(asker).spec->name;
    p.victim = owner.spec->name;
    preemptions_.push_back(p);
  }
  Run& r = run_at(asker);
  if (r.preemption_to_time) time_preemption(r, 0.0);  // an earlier ask that never ran a kernel stays at 0
  r.preemption_to_time = number;
  r.preemption_asked_s = now_;
  owner.preemption_to_move = number;
  // Nothing of it in the stream: it gives the GPU up now — unless its kernels have all run and
  // only its device gap is left, which ends the step (finish_device_stage records the drain).
  if (owner.completed == owner.launched && owner.completed < owner.profile.kernels_s.size()) drained(device, d.owner);
}

void Simulation::grant(int device, int j) {
  Device& d = device_at(device);
  d.owner = j;
  Run& r = run_at(j);
  if (scenario_.policy == Policy::timeslice && !r.input_ready) {
    start_host_work(j);
    return;
  }
  start_kernels(j);
}

void Simulation::start_kernels(int j) {
  Run& r = run_at(j);
  r.phase = Phase::device;
  if (r.suspended) {  // resume where the preemption stopped it: every launched kernel has run
    r.suspended = false;
  } else {
    r.launched = r.started = r.completed = 0;
  }
  r.preempted = false;
  r.launch_pending = false;
  Device& d = device_at(r.device);
  leave_stream_queues(d, j);
  if (r.profile.kernels_s.empty()) {  // nothing on the device: the step is its host stage
    end_of_kernels(r.device, j);
    return;
  }
  // The step's fed input waits for the stream: TensorFlow copies it to the GPU only once the
  // compute stream has run everything queued on it, whichever job queued it (docs/simulator.md,
  // "Free sharing"). Under an exclusive policy the stream is empty when the job gets it.
  if (d.kernels_finished < d.kernels_entered) {
    r.at_barrier = true;
    d.barrier.emplace_back(d.kernels_entered, j);
    return;
  }
  begin_launching(j);
}

void Simulation::begin_launching(int j) {
  Run& r = run_at(j);
  r.at_barrier = false;
  r.last_launch_s = now_;
  try_launch(j);
}

// Launches the job's next kernel now or schedules it, unless its window is full, it waits at a
// sync point, it was preempted or it launched them all; kernel_done tries again.
void Simulation::try_launch(int j) {
  Run& r = run_at(j);
  const std::size_t total = r.profile.kernels_s.size();
  if (r.launch_pending || r.launch_blocked || r.at_barrier || r.preempted || r.launched >= total) return;
  const auto window = static_cast<std::size_t>(std::max(0, r.profile.launch_window));
  if (window > 0 && r.launched - r.completed >= window) return;
  const auto sync = static_cast<std::size_t>(std::max(0, r.profile.sync_every));
  if (sync > 0 && r.launched > 0 && r.launched % sync == 0 && r.completed < r.launched) return;
  r.launch_pending = true;
  const double at = std::max(now_, r.last_launch_s + r.profile.launch_s * host_factor(j));
  schedule(at, EventKind::launch, j, kNone, r.token);
}

void Simulation::launch_kernel(int j) {
  Run& r = run_at(j);
  if (r.preempted || r.phase != Phase::device) return;
  Device& d = device_at(r.device);
  // A launch into a full queue blocks the host thread, and it enters after the launches that
  // blocked before it (of any job).
  if (d.queue_depth > 0 && (queue_full(d) || !d.blocked.empty())) {
    r.launch_blocked = true;
    d.blocked.push_back(j);
    return;
  }
  enter_stream(j);
}

void Simulation::enter_stream(int j) {
  Run& r = run_at(j);
  Device& d = device_at(r.device);
  ++r.launched;
  r.last_launch_s = now_;
  d.stream.push_back(j);
  ++d.kernels_entered;
  if (d.running == kNone) start_next_kernel(r.device);
  try_launch(j);
}

void Simulation::leave_stream_queues(Device& d, int j) {
  Run& r = run_at(j);
  d.blocked.erase(std::remove(d.blocked.begin(), d.blocked.end(), j), d.blocked.end());
  d.barrier.erase(std::remove_if(d.barrier.begin(), d.barrier.end(), [j](const auto& b) { return b.second == j; }), d.barrier.end());
  r.launch_blocked = false;
  r.at_barrier = false;
}

bool Simulation::queue_full(const Device& d) {
  const std::size_t held = d.stream.size() + (d.running != kNone ? 1U : 0U);
  return d.queue_depth > 0 && held >= static_cast<std::size_t>(d.queue_depth);
}

void Simulation::stream_advanced(int device) {
  Device& d = device_at(device);
  while (!d.barrier.empty() && d.barrier.front().first <= d.kernels_finished) {
    const int j = d.barrier.front().second;
    d.barrier.pop_front();
    if (run_at(j).at_barrier && run_at(j).phase == Phase::device) begin_launching(j);
  }
  while (!d.blocked.empty() && !queue_full(d)) {
    const int j = d.blocked.front();
    d.blocked.pop_front();
    Run& r = run_at(j);
    r.launch_blocked = false;
    if (!r.preempted && r.phase == Phase::device) enter_stream(j);  // a preempted job launches no more
  }
}

void Simulation::start_next_kernel(int device) {
  Device& d = device_at(device);
  if (d.running != kNone || d.stream.empty()) return;
  const int j = d.stream.front();
  d.stream.pop_front();
  Run& r = run_at(j);
  if (r.preemption_to_time) time_preemption(r, now_ - r.preemption_asked_s);
  d.running = j;
  set_power(d, busy_power(r, d));
  const double duration = r.profile.kernels_s[r.started++] * scaling_for(r, d).time;
  schedule(now_ + duration, EventKind::kernel_done, kNone, device, ++d.kernel_token);
}

void Simulation::kernel_done(int device) {
  Device& d = device_at(device);
  const int j = d.running;
  d.running = kNone;
  ++d.kernels_finished;
  set_power(d, d.info.idle_power_w);
  Run& r = run_at(j);
  if (r.phase != Phase::done) {
    ++r.completed;
    if (r.completed == r.profile.kernels_s.size()) {
      end_of_kernels(device, j);
    } else if (r.preempted && r.completed == r.launched) {
      drained(device, j);
    } else {
      try_launch(j);
    }
  }
  stream_advanced(device);
  start_next_kernel(device);
}

// A preempted job's launched kernels have all run: it gives the GPU up and will redo its step
// (keeping the input its host stage prepared).
//
// With resume_preempted (gpucap's mode), a job that is not about to move keeps its place in
// the step instead: it waits for the GPU again and goes on from its next kernel.
void Simulation::drained(int device, int j) {
  Run& r = run_at(j);
  Device& d = device_at(device);
  record_drain(r);
  r.preempted = false;
  ++r.token;  // its pending launch, if any, is void
  r.launch_pending = false;
  leave_stream_queues(d, j);
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
void Simulation::record_drain(const Run& r) {
  if (!r.preemption_to_move) return;
  if (auto* p = listed_preemption(*r.preemption_to_move)) p->drain_s = now_ - p->at_s;
}

// The step's kernels have all run; its device gap (if any) still holds the device.
void Simulation::end_of_kernels(int device, int j) {
  Run& r = run_at(j);
  if (r.profile.device_gap_s <= 0.0) {
    finish_device_stage(device, j);
    return;
  }
  schedule(now_ + r.profile.device_gap_s * host_factor(j), EventKind::device_gap_done, j, device, r.token);
}

// The waiting jobs are served before this one asks again (timeslice's round robin). A job
// preempted while its last kernels ran completes its step: nothing is redone.
void Simulation::finish_device_stage(int device, int j) {
  Device& d = device_at(device);
  if (run_at(j).preempted) record_drain(run_at(j));
  run_at(j).preempted = false;
  if (d.owner == j) {
    d.owner = kNone;
    serve_next(device);
  }
  step_done(j);
}

void Simulation::serve_next(int device) {
  Device& d = device_at(device);
  if (d.owner != kNone || d.waiting.empty()) return;
  const int j = d.waiting.front();
  d.waiting.pop_front();
  grant(device, j);
}

// Sharing devices: bring every active job's remaining work up to now.
void Simulation::update_sharing(Device& d) {
  const double elapsed = now_ - d.sharing_since_s;
  const double rate = sharing_rate(d);
  for (const int k : d.active) run_at(k).remaining_s = std::max(0.0, run_at(k).remaining_s - elapsed * rate);
  d.sharing_since_s = now_;
}

double Simulation::sharing_rate(const Device& d) const {
  if (d.active.empty()) return 0.0;
  return std::min(1.0, d.capacity / static_cast<double>(d.active.size()));
}

void Simulation::reschedule_sharing(int device) {
  Device& d = device_at(device);
  d.sharing_since_s = now_;
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

void Simulation::sharing_done(int device) {
  Device& d = device_at(device);
  update_sharing(d);
  std::vector<int> finished;
  for (const int k : d.active) {
    if (run_at(k).remaining_s <= 1e-9) finished.push_back(k);
  }
  for (const int k : finished) d.active.erase(std::remove(d.active.begin(), d.active.end(), k), d.active.end());
  reschedule_sharing(device);
  for (const int k : finished) {
    if (device == kHost) {
      host_done(k);
    } else {
      end_of_kernels(device, k);
    }
  }
}

}  // namespace gpucap::sched::detail
