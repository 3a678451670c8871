#include "gpucap/runtime/power_sampler.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/runtime/sim_platform.hpp"

namespace gpucap::runtime {

PowerSampler::PowerSampler(ReadPowerW read_power_w, NowS now_s, double sample_hz, double buffer_s)
    : read_power_w_(std::move(read_power_w)), now_s_(std::move(now_s)), sample_hz_(sample_hz) {
  check_sample_hz(sample_hz);
  if (!(buffer_s >= 1.0 && buffer_s <= 3600.0)) {
    throw usage_error(fmt::format("sample buffer of {:g} s must be between 1 and 3600 s", buffer_s));
  }
  ring_.resize(static_cast<std::size_t>(std::ceil(buffer_s * sample_hz)));
  thread_ = std::thread([this] { loop(); });
}

PowerSampler::~PowerSampler() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void PowerSampler::loop() {
  using clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(1.0 / sample_hz_));
  auto next = clock::now();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    PowerSample sample;
    try {
      sample.power_w = read_power_w_();
      sample.time_s = now_s_();
      failures_in_a_row_ = 0;
    } catch (const std::exception& e) {
      // A driver answers an odd call with an error now and then: that sample is skipped (said
      // once). Failing again and again, the GPU is gone: sampling stops and the reader hears why.
      lock.lock();
      ++failed_reads_;
      if (++failures_in_a_row_ >= kMaxFailuresInARow) {
        failure_ = std::current_exception();
        return;
      }
      if (failed_reads_ == 1) {
        spdlog::warn("a power reading failed ({}): that sample is skipped, and so is every failed one after it "
                     "(sampling stops after {} in a row)", e.what(), kMaxFailuresInARow);
      }
      next += period;
      if (next < clock::now()) next = clock::now() + period;
      wake_.wait_until(lock, next, [this] { return stopping_; });
      continue;
    } catch (...) {
      lock.lock();
      failure_ = std::current_exception();
      return;
    }
    lock.lock();
    if (count_ == ring_.size()) {  // full: the oldest goes
      head_ = (head_ + 1) % ring_.size();
      --count_;
      ++dropped_;
    }
    ring_[(head_ + count_) % ring_.size()] = sample;
    ++count_;
    // Ticks are on a fixed grid; after a stall (a slow read) it resumes from now, not in a burst.
    next += period;
    if (next < clock::now()) next = clock::now() + period;
    wake_.wait_until(lock, next, [this] { return stopping_; });
  }
}

void PowerSampler::take_until(double end_s, const PowerMeter::SampleSink& sink) {
  std::vector<PowerSample> ready;
  {
    const std::lock_guard lock(mutex_);
    if (failure_) std::rethrow_exception(failure_);
    while (count_ > 0 && ring_[head_].time_s <= end_s) {
      ready.push_back(ring_[head_]);
      head_ = (head_ + 1) % ring_.size();
      --count_;
    }
    taken_ += ready.size();
  }
  for (const auto& sample : ready) sink(sample);  // outside the lock: the sampler keeps going
}

std::size_t PowerSampler::failed_reads() const {
  const std::lock_guard lock(mutex_);
  return failed_reads_;
}

std::size_t PowerSampler::dropped() const {
  const std::lock_guard lock(mutex_);
  return dropped_;
}

std::size_t PowerSampler::taken() const {
  const std::lock_guard lock(mutex_);
  return taken_;
}

}  // namespace gpucap::runtime
