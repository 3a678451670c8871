#include "gpucap/serve/serving_loop.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpucap/core/error.hpp"
#include "gpucap/device/control_session.hpp"

namespace gpucap::serve {
namespace {

constexpr double kOpenTransition = std::numeric_limits<double>::infinity();

// The device side of the knobs (the batcher's go to the core).
Knobs device_knobs(const control::ServingKnobs& knobs) {
  Knobs out;
  out.sm_clock_mhz = knobs.sm_clock_mhz;
  out.mem_clock_mhz = knobs.memory_clock_mhz;
  out.power_limit_w = knobs.power_limit_w;
  return out;
}

}  // namespace

ServingLoop::ServingLoop(runtime::Platform& platform, control::ServingController& controller, ServingCore& core,
                         CapProvider cap, double slo_s)
    : platform_(platform),
      controller_(controller),
      core_(core),
      cap_provider_(std::move(cap)),
      slo_s_(slo_s),
      session_(platform.open_control_session()) {
  cap_ = cap_provider_(0.0);
  last_sample_cap_w_ = cap_.cap_w;
  const auto first = controller_.initial_knobs(cap_.cap_w);
  session_->apply(device_knobs(first));  // checks every value before the first write
  platform_.settle();
  origin_s_ = platform_.clock().now_s();
  core_.set_knobs(first, 0.0);
  // Readings from before serving (while settling) are not serving's.
  platform_.meter().collect(origin_s_, [](const PowerSample&) {});
  last_sample_s_ = origin_s_;
}

ServingLoop::~ServingLoop() {
  if (finished_) return;
  try {
    session_->restore();
  } catch (const std::exception& e) {
    spdlog::error("serve: restoring the GPU's settings failed: {}", e.what());
  }
}

double ServingLoop::now_s() const { return platform_.clock().now_s() - origin_s_; }

BatchRun ServingLoop::run(const Launch& launch) {
  const auto out = execute(launch);
  completed(launch, out);
  return out;
}

void ServingLoop::completed(const Launch& launch, const BatchRun& run) {
  core_.finished(launch, run.start_s, run.end_s, run.ok);
  ++window_batches_;
}

BatchRun ServingLoop::execute(const Launch& launch) {
  return execute_with([this, items = launch.items] { (void)platform_.engine().run_batch(items); });
}

BatchRun ServingLoop::execute_with(const std::function<void()>& compute) {
  BatchRun out;
  out.start_s = now_s();
  try {
    compute();
  } catch (const std::exception& e) {
    out.ok = false;
    out.error = e.what();
    spdlog::warn("serve: a batch failed: {}", e.what());
  }
  out.end_s = now_s();
  return out;
}

void ServingLoop::idle_until(double t_s) {
  const double gap_s = t_s - now_s();
  if (gap_s > 0.0 && platform_.simulated()) platform_.wait(gap_s);
}

void ServingLoop::collect_samples() {
  std::optional<PowerSample> newest;
  double newest_cap_w = 0.0;
  platform_.meter().collect(platform_.clock().now_s(), [this, &newest, &newest_cap_w](const PowerSample& sample) {
    const double t = sample.time_s - origin_s_;
    const double cap_w = cap_provider_(t).cap_w;
    // A cap that changed since the last sample opens a transition at once, also for the samples
    // taken before the loop next decides (as the Runner does).
    if (cap_w != last_sample_cap_w_) transition_end_s_ = kOpenTransition;
    last_sample_cap_w_ = cap_w;
    totals_.energy_j += last_sample_w_ * std::max(0.0, sample.time_s - last_sample_s_);
    last_sample_s_ = sample.time_s;
    last_sample_w_ = sample.power_w;
    window_power_.add(sample.power_w);
    if (sample.time_s >= settled_from_s_) settled_power_.add(sample.power_w);
    totals_.max_power_w = std::max(totals_.max_power_w, sample.power_w);
    if (t <= transition_end_s_) window_transition_ = true;
    if (sample.power_w > cap_w) {
      window_over_cap_ = true;
      totals_.time_over_cap_s += 1.0 / platform_.meter().sample_hz();
    }
    newest = sample;
    newest_cap_w = cap_w;
  });
  if (newest && on_sample_) on_sample_(*newest, newest_cap_w);
}

double ServingLoop::window_due_s() const {
  const auto period = controller_.period();
  return period.batches > 0 ? std::numeric_limits<double>::infinity() : window_start_s_ + period.seconds;
}

void ServingLoop::device_call(const std::function<void()>& call) {
  if (device_call_) {
    device_call_(call);
  } else {
    call();
  }
}

void ServingLoop::apply(const control::ServingKnobs& knobs) {
  const auto& before = core_.knobs();
  const bool device_changed = knobs.sm_clock_mhz != before.sm_clock_mhz ||
                              knobs.memory_clock_mhz != before.memory_clock_mhz || knobs.power_limit_w != before.power_limit_w;
  device_call([this, &knobs] { session_->apply(device_knobs(knobs)); });
  core_.set_knobs(knobs, now_s());
  if (device_changed) settled_from_s_ = platform_.clock().now_s() + platform_.power_settle_s();
}

std::optional<ServingWindow> ServingLoop::poll() {
  collect_samples();
  const double now = now_s();
  const auto cap = cap_provider_(now);
  const bool cap_changed = cap.cap_w != cap_.cap_w;
  if (cap_changed) transition_end_s_ = kOpenTransition;  // until the answer to it shows in the readings
  if (cap_changed) window_transition_ = true;
  cap_ = cap;
  const bool due = controller_.period().due(now - window_start_s_, window_batches_);
  if (!due && !(cap_changed && controller_.reacts_to_cap_changes())) return std::nullopt;
  if (window_power_.count() == 0 && !cap_changed) return std::nullopt;  // a decision needs a measurement
  auto window = close_window(now);
  control::ServingObservation o;
  o.time_s = now;
  o.window_s = window.end_s - window.start_s;
  o.cap_w = cap_.cap_w;
  o.slo_s = slo_s_;
  o.power = window.power;
  o.settled_power = window.settled_power;
  const double length_s = std::max(o.window_s, 1e-9);
  o.arrival_rps = static_cast<double>(window.counts.arrivals) / length_s;
  o.answered_rps = static_cast<double>(window.counts.answered) / length_s;
  if (window.counts.answered > 0) {
    o.items_per_request = static_cast<double>(window.counts.items) / static_cast<double>(window.counts.answered);
  }
  o.goodput_rps = static_cast<double>(window.counts.good) / length_s;
  o.shed_rps = static_cast<double>(window.counts.shed) / length_s;
  o.p99_s = window.slo.p99_s;
  o.slo_attainment = window.slo.slo_attainment;
  o.busy_fraction = std::clamp(window.counts.busy_s / length_s, 0.0, 1.0);
  o.batches = static_cast<int>(window.counts.batches);
  o.mean_batch_items = window.counts.batches > 0
                           ? static_cast<double>(window.counts.items) / static_cast<double>(window.counts.batches)
                           : 0.0;
  o.throughput_items_s = static_cast<double>(window.counts.items) / length_s;
  o.queued_requests = window.queued_requests;
  o.knobs = window.knobs;
  o.cap_transition = window.cap_transition;
  const auto next = controller_.decide(o);
  apply(next);
  spdlog::debug("serve: t={:.2f}s cap={:g}W max={:.1f}W p99={:.1f}ms -> {} [{}]", now, cap_.cap_w, o.power.max_w,
                o.p99_s * 1e3, control::describe(next), controller_.describe_state());
  // The controller has answered a cap change: once the reading shows its answer, the transition
  // is over.
  if (transition_end_s_ == kOpenTransition) transition_end_s_ = now + platform_.power_settle_s();
  return window;
}

ServingWindow ServingLoop::close_window(double now_s) {
  ServingWindow w;
  w.start_s = window_start_s_;
  w.end_s = now_s;
  w.cap_w = cap_.cap_w;
  w.cap_source = cap_.source;
  w.power = window_power_.stats(window_start_s_, now_s);
  if (settled_power_.count() > 0) {
    w.settled_power = settled_power_.stats(std::max(window_start_s_, settled_from_s_ - origin_s_), now_s);
  }
  w.over_cap = window_over_cap_;
  w.cap_transition = window_transition_;
  w.counts = core_.take_window();
  w.slo = core_.slo(now_s);
  w.knobs = core_.knobs();
  w.queued_requests = core_.queued_requests();
  w.sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();
  if (platform_.device().has_signal(device::Signal::sm_clock_mhz)) {
    device_call([this, &w] { w.sm_clock_mhz = platform_.device().read(device::Signal::sm_clock_mhz); });
  }
  ++totals_.windows;
  if (w.over_cap) {
    ++totals_.windows_over_cap;
    if (!w.cap_transition) ++totals_.windows_over_cap_outside_transitions;
  }
  window_start_s_ = now_s;
  window_batches_ = 0;
  window_power_.reset();
  settled_power_.reset();
  window_over_cap_ = false;
  window_transition_ = false;
  return w;
}

std::optional<ServingWindow> ServingLoop::finish() {
  if (finished_) return std::nullopt;
  collect_samples();
  std::optional<ServingWindow> last;
  if (window_power_.count() > 0) last = close_window(now_s());
  totals_.device_writes = session_->writes();
  finished_ = true;
  device_call([this] { session_->restore(); });  // explicit, so a failed restore surfaces as an error
  return last;
}

void ServingLoop::abandon() {
  if (finished_) return;
  totals_.device_writes = session_->writes();
  finished_ = true;
  session_->restore();
}

}  // namespace gpucap::serve
