#pragma once
// The power sampler of a real GPU: a thread that reads the board power at a fixed rate (default
// 100 Hz; NVML answers in about 0.1 ms) and keeps each reading, stamped with the steady clock,
// in a ring buffer; SampledPowerMeter hands them to the Runner window by window. The buffer holds
// `buffer_s` seconds of samples: if nobody collects for longer, the oldest are dropped and counted
// (dropped()), never stored without bound.

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gpucap/core/window_stats.hpp"
#include "gpucap/runtime/platform.hpp"

namespace gpucap::runtime {

class PowerSampler {
 public:
  using ReadPowerW = std::function<double()>;
  using NowS = std::function<double()>;

  // Starts the thread. Error(usage) for a rate outside 1..10,000 Hz or a buffer under 1 s.
  PowerSampler(ReadPowerW read_power_w, NowS now_s, double sample_hz, double buffer_s = 60.0);
  ~PowerSampler();  // stops and joins the thread
  PowerSampler(const PowerSampler&) = delete;
  PowerSampler& operator=(const PowerSampler&) = delete;

  [[nodiscard]] double sample_hz() const { return sample_hz_; }
  // A reading that fails is skipped (the first one logged); kMaxFailuresInARow failures in a row
  // stop the sampling: the GPU is gone, not hiccupping.
  static constexpr std::size_t kMaxFailuresInARow = 10;
  // Hands every sample stamped at or before end_s to `sink`, oldest first, and drops them. If
  // sampling stopped (kMaxFailuresInARow failed readings in a row), rethrows the last error.
  void take_until(double end_s, const PowerMeter::SampleSink& sink);
  [[nodiscard]] std::size_t dropped() const;
  // Readings that failed and were skipped.
  [[nodiscard]] std::size_t failed_reads() const;
  [[nodiscard]] std::size_t taken() const;

 private:
  void loop();

  ReadPowerW read_power_w_;
  NowS now_s_;
  double sample_hz_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<PowerSample> ring_;
  std::size_t head_ = 0;   // oldest sample
  std::size_t count_ = 0;
  std::size_t dropped_ = 0;
  std::size_t taken_ = 0;
  std::size_t failed_reads_ = 0;
  std::size_t failures_in_a_row_ = 0;
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

// The PowerMeter over a sampler.
class SampledPowerMeter final : public PowerMeter {
 public:
  explicit SampledPowerMeter(PowerSampler& sampler) : sampler_(sampler) {}
  [[nodiscard]] double sample_hz() const override { return sampler_.sample_hz(); }
  void collect(double end_s, const SampleSink& sink) override { sampler_.take_until(end_s, sink); }

 private:
  PowerSampler& sampler_;
};

}  // namespace gpucap::runtime
