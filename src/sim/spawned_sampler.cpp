#include "gpucap/sim/spawned_sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::sim {

namespace {

// Processes started in [0, t): two per full cycle, plus those of the cycle t falls in.
long long starts_before(const SpawnedSampler& s, double t) {
  if (t <= 0.0) return 0;
  const double period = s.period_s();
  const auto cycles = static_cast<long long>(std::floor(t / period));
  const double into = t - static_cast<double>(cycles) * period;
  return 2 * cycles + (into > 0.0 ? 1 : 0) + (into > s.process_s ? 1 : 0);
}

}  // namespace

double SpawnedSampler::reading_time_s(long long j) const { return static_cast<double>(j) * period_s() + process_s; }

long long SpawnedSampler::process_starts(double from_s, double to_s) const {
  if (to_s <= from_s) return 0;
  return starts_before(*this, to_s) - starts_before(*this, from_s);
}

double SpawnedSampler::stalled_duration_s(double start_s, double work_s, double stall_share) const {
  // Each pass lets the stalls found so far stretch the interval; the count only grows and is
  // bounded (a stall is shorter than the spacing of two starts), so this ends.
  long long stalls = 0;
  while (true) {
    const double duration = work_s + static_cast<double>(stalls) * stall_s * stall_share;
    const long long found = process_starts(start_s, start_s + duration);
    if (found == stalls) return duration;
    stalls = found;
  }
}

double SpawnedSampler::stalled_at_least(int k, double work_s) const {
  // Stalls nest: a step holds k of them exactly when the k-th process start after it begins comes
  // before work + (k − 1) stalls have passed. From a random point, that start is U + c, with U
  // uniform over the gap the point fell in (a = process_s or b = process_s + sleep_s) and c the
  // k − 1 gaps after it, which alternate.
  if (k < 1) return 1.0;
  const double a = process_s;
  const double b = process_s + sleep_s;
  const double reach_s = work_s + (k - 1) * stall_s;
  const auto pairs = static_cast<double>((k - 1) / 2);
  const bool odd = (k - 1) % 2 == 1;
  const double after_a = pairs * (a + b) + (odd ? b : 0.0);
  const double after_b = pairs * (a + b) + (odd ? a : 0.0);
  return (std::clamp(reach_s - after_a, 0.0, a) + std::clamp(reach_s - after_b, 0.0, b)) / period_s();
}

double SpawnedSampler::median_step_s(double work_s) const {
  // Each count k of stalls is spread evenly over [w + (k − ½)·stall, w + (k + ½)·stall], as the
  // steps' own jitter spreads it, so the median moves continuously with every parameter.
  if (stall_s <= 0.0) return work_s;
  double below = 0.0;  // P(fewer than k stalls)
  for (int k = 0;; ++k) {
    const double p_k = stalled_at_least(k, work_s) - stalled_at_least(k + 1, work_s);
    if (below + p_k >= 0.5 && p_k > 0.0) return work_s + (k - 0.5 + (0.5 - below) / p_k) * stall_s;
    below += p_k;
  }
}

void check_spawned_sampler(const SpawnedSampler& s) {
  if (!(s.process_s > 0.0 && s.process_s <= 10.0)) {
    throw usage_error(fmt::format("nvidia-smi process time {:g} s must be in (0, 10] s", s.process_s));
  }
  if (!(s.stall_s >= 0.0 && s.stall_s < s.process_s)) {
    throw usage_error(fmt::format("nvidia-smi stall {:g} s must be >= 0 and shorter than a process ({:g} s)", s.stall_s,
                                  s.process_s));
  }
  if (!(s.sleep_s >= 0.0 && s.sleep_s <= 10.0)) {
    throw usage_error(fmt::format("sampler sleep {:g} s must be in [0, 10] s", s.sleep_s));
  }
}

}  // namespace gpucap::sim
