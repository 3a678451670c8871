#pragma once
// gpucap load's connections (load_generator.cpp): each request's deadline, the error messages kept
// for the report, and the open loop's pool of idle workers.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpucap/service/load_generator.hpp"

namespace gpucap::service::load_detail {

using Clock = std::chrono::steady_clock;

inline constexpr std::size_t kMaxErrorSamples = 5;
// The longest a sleeping worker takes to notice a stop request.
inline constexpr auto kStopPoll = std::chrono::milliseconds(20);

// One connection's request in flight, for the driver's deadline: cpp-httplib's timeouts are per
// connect, write and read, so a server that answers slowly, or trickles its answer a byte at a
// time, would hold the request (and the run) far past --timeout-ms. The driver stops the
// connection of a request older than the timeout; the lock keeps it from stopping the next one.
class RequestWatch {
 public:
  void begin(Clock::time_point sent_at) {
    const std::lock_guard lock(mutex_);
    sent_at_ = sent_at;
    past_deadline_ = false;
  }
  // Whether the driver stopped this request at its deadline.
  bool end() {
    const std::lock_guard lock(mutex_);
    sent_at_.reset();
    return past_deadline_;
  }
  // Stops `client`'s request if it was sent `timeout` or more before `now`.
  void stop_if_past(Clock::time_point now, Clock::duration timeout, httplib::Client& client) {
    const std::lock_guard lock(mutex_);
    if (!sent_at_ || past_deadline_ || now - *sent_at_ < timeout) return;
    past_deadline_ = true;
    client.stop();
  }

 private:
  std::mutex mutex_;
  std::optional<Clock::time_point> sent_at_;
  bool past_deadline_ = false;
};

class ErrorLog {
 public:
  void add(int http_status, std::string message) {
    const std::lock_guard lock(mutex_);
    for (auto& sample : samples_) {
      if (sample.http_status == http_status && sample.message == message) {
        ++sample.count;
        return;
      }
    }
    if (samples_.size() < kMaxErrorSamples) {
      samples_.push_back({http_status, std::move(message), 1});
    } else {
      ++others_;
    }
  }
  void add_retry_after(double seconds) {
    const std::lock_guard lock(mutex_);
    ++retry_after_count_;
    max_retry_after_s_ = std::max(max_retry_after_s_.value_or(seconds), seconds);
  }
  void into(LoadReport& report) const {
    const std::lock_guard lock(mutex_);
    report.errors = samples_;
    report.other_errors = others_;
    report.retry_after_count = retry_after_count_;
    report.max_retry_after_s = max_retry_after_s_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<ErrorSample> samples_;
  std::uint64_t others_ = 0;
  std::uint64_t retry_after_count_ = 0;
  std::optional<double> max_retry_after_s_;
};

// The open loop's connections. The dispatcher hands each request, at its time, to the idle
// worker that went idle last (LIFO), so a light load keeps few connections open and warm, and a
// server that gives each connection a thread (cpp-httplib) is not held by idle ones.
class WorkerPool {
 public:
  explicit WorkerPool(std::size_t workers) : jobs_(workers) {
    for (std::size_t i = workers; i > 0; --i) idle_.push_back(i - 1);  // worker 0 first
  }

  // An idle worker, once one is free; nullopt if none was by `deadline` or a stop (*stop, which
  // may be null) came first.
  std::optional<std::size_t> acquire(const std::atomic<bool>* stop, Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    while (idle_.empty()) {
      if ((stop != nullptr && stop->load(std::memory_order_relaxed)) || Clock::now() >= deadline) return std::nullopt;
      idle_cv_.wait_until(lock, std::min(deadline, Clock::now() + kStopPoll));
    }
    const auto worker = idle_.back();
    idle_.pop_back();
    return worker;
  }
  void assign(std::size_t worker, double scheduled_s) {
    {
      const std::lock_guard lock(mutex_);
      jobs_[worker].scheduled_s = scheduled_s;
    }
    jobs_[worker].cv.notify_one();
  }
  // No more requests: each worker ends after the one it has.
  void close() {
    {
      const std::lock_guard lock(mutex_);
      closed_ = true;
    }
    for (auto& job : jobs_) job.cv.notify_one();
  }

  // The worker's next request (its scheduled time); nullopt once the pool is closed.
  std::optional<double> next_job(std::size_t worker) {
    std::unique_lock lock(mutex_);
    auto& job = jobs_[worker];
    job.cv.wait(lock, [&] { return job.scheduled_s.has_value() || closed_; });
    const auto scheduled_s = job.scheduled_s;
    job.scheduled_s.reset();
    return scheduled_s;
  }
  void release(std::size_t worker) {
    {
      const std::lock_guard lock(mutex_);
      idle_.push_back(worker);
    }
    idle_cv_.notify_one();
  }

 private:
  struct Job {
    std::condition_variable cv;
    std::optional<double> scheduled_s;
  };
  std::mutex mutex_;
  std::condition_variable idle_cv_;
  std::vector<std::size_t> idle_;  // a stack: the last released is the next acquired
  std::vector<Job> jobs_;
  bool closed_ = false;
};

}  // namespace gpucap::service::load_detail
