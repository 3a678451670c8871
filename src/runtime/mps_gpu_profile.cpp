#include "gpucap/runtime/mps_gpu_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/runtime/mps_process.hpp"

namespace gpucap::runtime {

namespace {

struct Reading {
  double t_s = 0.0;
  double power_w = 0.0;
  double sm_clock_mhz = 0.0;
  double utilization = 0.0;
  double memory_utilization = -1.0;  // < 0: the device has no such signal
};

// Reads the GPU at a fixed rate on a thread of its own until destroyed.
class SignalSampler {
 public:
  SignalSampler(device::Device& gpu, double sample_hz) : gpu_(gpu), period_(1.0 / sample_hz) {
    thread_ = std::thread([this] { loop(); });
  }
  ~SignalSampler() {
    stop_ = true;
    thread_.join();
  }
  SignalSampler(const SignalSampler&) = delete;
  SignalSampler& operator=(const SignalSampler&) = delete;

  // The readings so far; rethrows a failed read.
  std::vector<Reading> readings() {
    std::lock_guard lock(mutex_);
    if (failure_) std::rethrow_exception(failure_);
    return readings_;
  }

 private:
  void loop() {
    const bool has_memory = gpu_.has_signal(device::Signal::memory_utilization);
    auto next = std::chrono::steady_clock::now();
    while (!stop_) {
      try {
        Reading r;
        r.t_s = steady_now_s();
        r.power_w = gpu_.read(device::Signal::power_w);
        r.sm_clock_mhz = gpu_.read(device::Signal::sm_clock_mhz);
        r.utilization = gpu_.read(device::Signal::utilization);
        if (has_memory) r.memory_utilization = gpu_.read(device::Signal::memory_utilization);
        std::lock_guard lock(mutex_);
        readings_.push_back(r);
      } catch (...) {
        std::lock_guard lock(mutex_);
        failure_ = std::current_exception();
        return;
      }
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(period_));
      std::this_thread::sleep_until(next);
    }
  }

  device::Device& gpu_;
  double period_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<Reading> readings_;
  std::exception_ptr failure_;
  std::thread thread_;
};

std::vector<tune::Tenant> tenants_of(const ProfileConfig& config) {
  std::vector<tune::Tenant> tenants;
  for (std::size_t i = 0; i < config.shares_pct.size(); ++i) {
    tenants.push_back(tune::Tenant{static_cast<int>(std::lround(config.shares_pct[i])), config.batches[i]});
  }
  return tenants;
}

}  // namespace

GpuProfiler::GpuProfiler(device::Device& gpu, device::ControlSession* clocks, MpsPoolOptions pool,
                         GpuProfileOptions options)
    : gpu_(gpu), clocks_(clocks), pool_options_(std::move(pool)), options_(options) {
  if (!(options_.sample_hz >= 1.0 && options_.sample_hz <= 1000.0)) {
    throw usage_error(fmt::format("--sample-hz {:g} must be between 1 and 1000", options_.sample_hz));
  }
  if (!(options_.round.measure_s >= 0.1) || !(options_.round.warmup_s >= 0.0)) {
    throw usage_error("the measurement must last at least 0.1 s and the warm-up must not be negative");
  }
}

GpuProfiler::~GpuProfiler() {
  try {
    stop();
  } catch (const std::exception&) {
    // The pool logs what it could not stop; a destructor must not throw.
  }
}

void GpuProfiler::stop() {
  if (pool_) pool_->stop();
  pool_.reset();
}

ProfileRow GpuProfiler::measure(const ProfileConfig& config) {
  if (clocks_ != nullptr) {
    Knobs knobs;
    knobs.sm_clock_mhz = config.sm_clock_mhz;
    if (options_.lock_memory_clock) knobs.mem_clock_mhz = config.memory_clock_mhz;
    clocks_->apply(knobs);
  }
  const auto tenants = tenants_of(config);
  if (!pool_) pool_ = std::make_unique<MpsWorkerPool>(pool_options_, tenants);
  std::vector<Reading> readings;
  MpsRoundResult round;
  const double start_s = steady_now_s();
  {
    SignalSampler sampler(gpu_, options_.sample_hz);
    round = pool_->run_round(tenants, options_.round);
    readings = sampler.readings();
  }
  // The measured part: after the workers' warm-up, for as long as they measured.
  const double from_s = start_s + options_.round.warmup_s;
  const double to_s = from_s + options_.round.measure_s;
  ProfileRow row;
  row.config = config;
  for (std::size_t i = 0; i < round.tenants.size() && i < row.config.batches.size(); ++i) {
    row.config.batches[i] = round.tenants[i].batch_used;
  }
  std::size_t n = 0, n_memory = 0;
  double power_sum = 0.0, clock_sum = 0.0, util_sum = 0.0, memory_sum = 0.0;
  for (const auto& r : readings) {
    if (r.t_s < from_s || r.t_s > to_s) continue;
    ++n;
    power_sum += r.power_w;
    clock_sum += r.sm_clock_mhz;
    util_sum += r.utilization;
    row.measured.max_power_w = std::max(row.measured.max_power_w, r.power_w);
    if (r.memory_utilization >= 0.0) {
      ++n_memory;
      memory_sum += r.memory_utilization;
    }
  }
  if (n == 0) {
    throw Error(ErrorCode::device, fmt::format("no power reading fell in the {:g}-s measurement of {} (sampling at {:g} Hz)",
                                               options_.round.measure_s, tune::describe(tenants), options_.sample_hz));
  }
  const double count = static_cast<double>(n);
  row.measured.throughput_img_s = round.throughput_img_s;
  row.measured.mean_power_w = power_sum / count;
  row.measured.cost_s = options_.round.warmup_s + options_.round.measure_s;
  row.sm_clock_mhz = clock_sum / count;
  row.sm_util_pct = 100.0 * util_sum / count;
  row.memory_util_pct = n_memory > 0 ? 100.0 * memory_sum / static_cast<double>(n_memory) : 0.0;
  return row;
}

}  // namespace gpucap::runtime
