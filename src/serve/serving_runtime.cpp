#include "gpucap/serve/serving_runtime.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "gpucap/core/error.hpp"

namespace gpucap::serve {
namespace {

// With nothing due, the GPU thread still looks every this often (a window of a batch-counted
// period, a cap set by a source that did not wake it).
constexpr double kLongestSleepS = 0.5;
// How long the waiting thread tries a busy core before it leaves a request to submit().
constexpr auto kEarlyCheckPatience = std::chrono::microseconds(200);

std::future<Answer> ready(Answer answer) {
  std::promise<Answer> promise;
  promise.set_value(std::move(answer));
  return promise.get_future();
}

// The answer to a request the core did not admit: shed (429) or refused by the queue.
Answer refusal_of(const Admission& admission) {
  Answer a;
  a.kind = admission.result == AdmissionResult::shed ? AnswerKind::shed : AnswerKind::refused;
  a.admission = admission.result;
  a.message = admission.message;
  a.retry_after_s = admission.retry_after_s;
  return a;
}

}  // namespace

ServingRuntime::ServingRuntime(runtime::Platform& platform, control::ServingController& controller, CapState& cap,
                               RuntimeOptions options, Executor executor, WindowSink on_window, SampleSink on_sample)
    : platform_(platform),
      cap_(cap),
      options_(std::move(options)),
      executor_(std::move(executor)),
      on_window_(std::move(on_window)) {
  if (!(options_.pace > 0.0)) throw usage_error("the serving pace must be positive");
  if (options_.batch_timeout_s && !(*options_.batch_timeout_s > 0.0 && std::isfinite(*options_.batch_timeout_s))) {
    throw usage_error(fmt::format("the batch timeout {:g} s must be positive", *options_.batch_timeout_s));
  }
  // The thread prepares first (nothing set up yet), then waits for the go: set_up() has run here,
  // or failed (the thread ends, joined before the error leaves).
  auto prepared = std::make_shared<std::promise<void>>();
  auto prepared_result = prepared->get_future();
  std::promise<bool> go;
  thread_ = std::thread([this, prepared, go_result = go.get_future()]() mutable {
    try {
      if (options_.prepare) options_.prepare();
      prepared->set_value();
    } catch (...) {
      prepared->set_exception(std::current_exception());
      return;
    }
    if (go_result.get()) gpu_thread();
  });
  try {
    prepared_result.get();
    set_up(controller, std::move(on_sample));
  } catch (...) {
    go.set_value(false);
    thread_.join();
    throw;
  }
  go.set_value(true);
}

void ServingRuntime::set_up(control::ServingController& controller, SampleSink on_sample) {
  auto stats = options_.stats;
  stats.slo_s = options_.slo_s;
  core_ = std::make_unique<ServingCore>(options_.batcher, stats, controller.initial_knobs(cap_.at(0.0).cap_w));
  loop_ = std::make_unique<ServingLoop>(platform_, controller, *core_, [this](double t) { return cap_.at(t); },
                                        options_.slo_s);
  if (on_sample) loop_->on_power_sample(std::move(on_sample));
  start_ = std::chrono::steady_clock::now();
}

ServingRuntime::~ServingRuntime() {
  try {
    (void)drain();
  } catch (const std::exception& e) {
    spdlog::error("serve: {}", e.what());
  }
}

double ServingRuntime::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() * options_.pace;
}

std::chrono::steady_clock::time_point ServingRuntime::wall_at(double t_s) const {
  const double wall_s = std::min(t_s / options_.pace, now_s() / options_.pace + kLongestSleepS);
  return start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(wall_s));
}

std::future<Answer> ServingRuntime::submit(std::uint64_t id, int items, int priority, std::optional<double> timeout_s,
                                           const std::shared_ptr<HeldPlace>& place) {
  std::unique_lock lock(mutex_);
  const bool held = place != nullptr && &place->runtime_ == this && !place->used_;
  if (held) place->used_ = true;  // admit() gives its room back, whatever it decides
  if (draining_ || stopped_) {
    if (held) core_->give_back_place();
    Answer a;
    a.kind = AnswerKind::stopping;
    a.message = "the server is shutting down";
    return ready(std::move(a));
  }
  if (stalled_locked()) {  // it would wait behind a batch that may never end
    if (held) core_->give_back_place();
    return ready(stalled_answer_locked());
  }
  const double now = now_s();
  const auto admission = core_->admit(PendingRequest{id, items, now, priority, timeout_s}, now, held);
  if (!admission.accepted()) return ready(refusal_of(admission));
  auto [it, inserted] = waiting_.try_emplace(id);
  if (!inserted) throw Error(ErrorCode::internal, "a request id was submitted twice");
  auto future = it->second.get_future();
  ++wake_calls_;
  lock.unlock();
  wake_.notify_one();
  return future;
}

ServingRuntime::EarlyArrival ServingRuntime::arrive_early() {
  // Asked on a server's waiting thread, which must not wait long. The core is held for a few
  // microseconds at a time (a worker's submit, a decision, a scrape), so a busy lock is tried again
  // for a little while; if it stays busy (its holder descheduled), submit() decides.
  std::unique_lock lock(mutex_, std::defer_lock);
  const auto give_up = std::chrono::steady_clock::now() + kEarlyCheckPatience;
  while (!lock.try_lock()) {
    if (std::chrono::steady_clock::now() >= give_up) return {};
    std::this_thread::yield();
  }
  if (draining_ || stopped_) return {};  // submit() answers `stopping`
  if (stalled_locked()) return {stalled_answer_locked(), nullptr};  // refused on its headers, like a shed one
  // Clients that send their headers and then nothing would hold every place of the queue until
  // their deadline, and every other request would be shed: past half the queue's bound, no place
  // is held. A request the runtime would shed now is still refused at once; one it would not is
  // let through unheld, and submit() decides when its body is in.
  if (!core_->may_hold()) {
    if (const auto admission = core_->shed_on_arrival(now_s())) return {refusal_of(*admission), nullptr};
    return {};
  }
  if (const auto admission = core_->shed_or_hold(now_s())) return {refusal_of(*admission), nullptr};
  return {std::nullopt, std::make_shared<HeldPlace>(*this)};
}

ServingRuntime::HeldPlace::~HeldPlace() {
  if (!used_) runtime_.give_back_place();
}

void ServingRuntime::give_back_place() {
  const std::lock_guard lock(mutex_);
  core_->give_back_place();
}

std::size_t ServingRuntime::pending() const {
  const std::lock_guard lock(mutex_);
  return core_->queued_requests();
}

std::size_t ServingRuntime::in_flight() const {
  const std::lock_guard lock(mutex_);
  return waiting_.size();
}

void ServingRuntime::cap_changed() {
  {
    const std::lock_guard lock(mutex_);
    ++wake_calls_;
  }
  wake_.notify_one();
}

WindowCounts ServingRuntime::counts() const {
  const std::lock_guard lock(mutex_);
  return core_->totals();
}

LatencySummary ServingRuntime::slo() const {
  const std::lock_guard lock(mutex_);
  return core_->slo(now_s());
}

bool ServingRuntime::draining() const {
  const std::lock_guard lock(mutex_);
  return draining_;
}

bool ServingRuntime::serving() const {
  const std::lock_guard lock(mutex_);
  return !draining_ && !stopped_ && !stalled_locked();
}

bool ServingRuntime::stalled() const {
  const std::lock_guard lock(mutex_);
  return stalled_locked();
}

bool ServingRuntime::stalled_locked() const {
  const auto started = batch_started_ ? batch_started_ : device_call_started_;
  return started && options_.batch_timeout_s &&
         std::chrono::steady_clock::now() - *started > std::chrono::duration<double>(*options_.batch_timeout_s);
}

ServingRuntime::Withdrawal ServingRuntime::withdraw(std::uint64_t id) {
  const std::lock_guard lock(mutex_);
  if (!stalled_locked()) return Withdrawal::not_stalled;  // the batch returned since the caller looked
  if (!core_->withdraw(id, now_s())) return Withdrawal::in_batch;
  answer(id, stalled_answer_locked());
  return Withdrawal::withdrawn;
}

Answer ServingRuntime::stalled_answer() const {
  const std::lock_guard lock(mutex_);
  return stalled_answer_locked();
}

bool ServingRuntime::abandoned_in_device_call() const {
  const std::lock_guard lock(mutex_);
  return abandoned_ && abandoned_in_device_call_;
}

Answer ServingRuntime::stalled_answer_locked() const {
  Answer a;
  a.kind = AnswerKind::stalled;
  a.message = device_call_started_
                  ? fmt::format("the GPU's driver has not answered a settings call in {:g} s",
                                options_.batch_timeout_s.value_or(0.0))
                  : fmt::format("the GPU has not finished its batch in {:g} s", options_.batch_timeout_s.value_or(0.0));
  return a;
}

void ServingRuntime::answer(std::uint64_t id, Answer answer) {
  const auto it = waiting_.find(id);
  if (it == waiting_.end()) return;
  it->second.set_value(std::move(answer));
  waiting_.erase(it);
}

void ServingRuntime::answer_everyone(AnswerKind kind, const std::string& message) {
  for (auto& [id, promise] : waiting_) {
    Answer a;
    a.kind = kind;
    a.message = message;
    promise.set_value(std::move(a));
  }
  waiting_.clear();
}

bool ServingRuntime::run_one(const Launch& launch, std::unique_lock<std::mutex>& lock) {
  batch_started_ = std::chrono::steady_clock::now();
  lock.unlock();
  BatchRun run;
  try {
    run = executor_(*loop_, launch);
  } catch (const std::exception& e) {
    run.ok = false;
    run.error = e.what();
    run.start_s = run.end_s = loop_->now_s();
  }
  lock.lock();
  batch_started_.reset();
  if (abandoned_) return false;  // its requests were answered and the GPU restored meanwhile
  loop_->completed(launch, run);
  for (const auto& r : launch.requests) {
    Answer a;
    a.kind = run.ok ? AnswerKind::ok : AnswerKind::failed;
    a.message = run.error;
    a.queue_s = std::max(0.0, run.start_s - r.arrival_s);
    a.compute_s = run.end_s - run.start_s;
    a.batch_items = launch.items;
    answer(r.id, std::move(a));
  }
  return true;
}

namespace {

// Thrown on the GPU thread when a drain gave up on it while it waited on the driver: nothing more
// is its to do (gpu_thread ends).
struct GivenUp {};

}  // namespace

void ServingRuntime::gpu_thread() {
  std::unique_lock lock(mutex_);
  // Between batches the loop may wait on the driver (knob writes, clock reads, the restore): not
  // with the lock, which every request's submission and every scrape needs, and watched like a
  // batch, so that a driver that hangs there stalls the GPU (503s, readiness, the drain) instead
  // of holding the server.
  // The call holds this function's lock: it is the GPU thread's alone, and goes with it.
  struct ClearedAtExit {
    explicit ClearedAtExit(ServingLoop& l) : loop(l) {}
    ServingLoop& loop;
    ClearedAtExit(const ClearedAtExit&) = delete;
    ClearedAtExit& operator=(const ClearedAtExit&) = delete;
    ~ClearedAtExit() { loop.through_device_calls({}); }
  } const cleared{*loop_};
  loop_->through_device_calls([this, &lock](const std::function<void()>& call) {
    device_call_started_ = std::chrono::steady_clock::now();
    lock.unlock();
    std::exception_ptr error;
    try {
      call();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    device_call_started_.reset();
    if (abandoned_) throw GivenUp{};
    if (error) std::rethrow_exception(error);
  });
  const auto emit = [this, &lock](const std::optional<ServingWindow>& window) {
    if (!window || !on_window_) return;
    lock.unlock();
    try {
      on_window_(*window);
    } catch (const std::exception& e) {
      spdlog::warn("serve: a window could not be exported: {}", e.what());
    }
    lock.lock();
  };
  try {
    while (!abandoned_) {
      // A wake call made while this thread does not hold the lock (a batch, a sink) must not be
      // lost: the wait below returns at once when one came since this look at the queue.
      const auto calls_seen = wake_calls_;
      loop_->idle_until(now_s());  // the twin's virtual time up to the present
      const double t = loop_->now_s();
      const auto step = core_->step(t);
      for (const auto id : step.timed_out) {
        Answer a;
        a.kind = AnswerKind::timed_out;
        a.message = "Request timeout expired";
        answer(id, std::move(a));
      }
      if (step.launch) {
        if (!run_one(*step.launch, lock)) return;
        emit(loop_->poll());
        continue;
      }
      emit(loop_->poll());
      if (abandoned_) return;  // given up on while a sink ran
      if (draining_ && core_->queued_requests() == 0 && waiting_.empty()) break;
      const double wake = std::min({step.wake_s.value_or(std::numeric_limits<double>::infinity()), loop_->window_due_s(),
                                    cap_.next_change_s(t)});
      (void)wake_.wait_until(lock, wall_at(wake), [this, calls_seen] { return wake_calls_ != calls_seen; });
    }
    if (abandoned_) return;
    emit(loop_->finish());
    totals_ = loop_->totals();
  } catch (...) {
    if (!lock.owns_lock()) lock.lock();  // an exception from the executor or a sink, thrown unlocked
    batch_started_.reset();
    if (abandoned_) return;
    failure_ = std::current_exception();
    answer_everyone(AnswerKind::failed, "the serving loop failed");
    stopped_ = true;
    stopped_cv_.notify_all();
    lock.unlock();
    if (options_.on_failure) options_.on_failure();
    return;
  }
  stopped_ = true;
  stopped_cv_.notify_all();
}

ServingTotals ServingRuntime::drain(HungBatch hung) {
  bool gave_up = false;
  {
    std::unique_lock lock(mutex_);
    draining_ = true;
    ++wake_calls_;
    wake_.notify_one();
    // Only a batch past its timeout is given up on: the GPU thread is then in the executor, away
    // from the loop, the core and the window sinks, and stays there whatever else this thread does.
    // The stall is a matter of time, so it is looked at every 50 ms.
    while (hung == HungBatch::give_up && !stopped_) {
      if (stalled_locked()) {
        abandon_locked();
        break;
      }
      (void)stopped_cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stopped_; });
    }
    // Given up: a drain that waits (the destructor's) joins the thread once the batch returns.
    gave_up = hung == HungBatch::give_up && abandoned_;
  }
  if (gave_up) return restore_beside_the_hung_batch();
  if (thread_.joinable()) thread_.join();
  if (failure_) {
    auto failure = failure_;
    failure_ = nullptr;
    std::rethrow_exception(failure);
  }
  return totals_;
}

bool ServingRuntime::abandoned() const {
  const std::lock_guard lock(mutex_);
  return abandoned_;
}

void ServingRuntime::abandon_locked() {
  abandoned_ = true;
  abandoned_in_device_call_ = device_call_started_.has_value();
  stopped_ = true;
  answer_everyone(AnswerKind::stopping, "the server stopped before this request's batch ended");
  ++wake_calls_;
  wake_.notify_one();
}

ServingTotals ServingRuntime::restore_beside_the_hung_batch() {
  // Without the runtime's lock: the GPU thread, once abandoned, never touches the loop again, and a
  // restore through a driver that hangs as well must not hold the HTTP threads (submissions,
  // scrapes) behind it.
  std::optional<std::string> error;
  if (abandoned_in_device_call_) {
    // The GPU thread is still in the driver, in a call on the same control session: a restore
    // beside it would race it (and most likely hang as well). The journal has every setting.
    error = fmt::format("a call to the GPU's driver (a settings write or a clock read) has not returned in {:g} s; the "
                        "settings were not put back beside it",
                        options_.batch_timeout_s.value_or(0.0));
    spdlog::error("serve: {}", *error);
  } else {
    try {
      loop_->abandon();
    } catch (const std::exception& e) {
      error = e.what();
      spdlog::error("serve: restoring the GPU's settings failed: {}", e.what());
    }
  }
  const std::lock_guard lock(mutex_);
  if (error) abandoned_restore_error_ = error;
  totals_ = loop_->totals();
  return totals_;
}

std::optional<std::string> ServingRuntime::abandoned_restore_error() const {
  const std::lock_guard lock(mutex_);
  return abandoned_restore_error_;
}

}  // namespace gpucap::serve
