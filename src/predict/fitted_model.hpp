#pragma once
// The closed-form priors of predict/fitted.hpp, templated on the scalar so that Ceres can
// differentiate them (with ceres::Jet, found by argument-dependent lookup) and prediction can run
// them in double. docs/predictor.md has the equations; the names here follow it.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

namespace gpucap::predict::detail {

// Sharpness of the smooth maximum of 1 and the memory-bandwidth demand.
inline constexpr double kBandwidthSharpness = 4.0;

template <typename T>
struct ThroughputParams {
  T work_s, overhead_s, fill_batch, fill_sharpness, share_exponent, bandwidth_s, interference, clock_exponent,
      clock_insensitive;
};

template <typename T>
struct ThroughputPrior {
  T throughput;  // img/s, all tenants
  T demand;      // D = β·Σ isolated throughputs: memory-bandwidth demand (1 = saturated)
  T traffic;     // β·throughput: the share of the bandwidth used
  T activity;    // Σ c_i·busy_i: mean fraction of the SMs executing
  T busy_union;  // 1 − Π(1 − busy_i): fraction of the time some kernel runs
};

// One tenant: the fraction c of the GPU its kernels fill (a smooth minimum of its share, as x^α,
// and of what its batch can fill) and its compute time per batch at clock ratio φ: the part ρ that does
// not follow the SM clock (memory stalls) plus the part 1 − ρ that does, as 1/φ^γ (clock = φ^γ).
template <typename T>
inline void tenant_compute(const ThroughputParams<T>& q, double share_frac, int batch, const T& clock, T& fill,
                           T& compute_s) {
  using std::pow;
  const T b = T(static_cast<double>(batch));
  const T by_batch = b / q.fill_batch;
  const T by_share = pow(T(share_frac), q.share_exponent);
  fill = pow(pow(by_share, -q.fill_sharpness) + pow(by_batch, -q.fill_sharpness), -1.0 / q.fill_sharpness);
  compute_s = b * q.work_s / fill * (q.clock_insensitive + (1.0 - q.clock_insensitive) / clock);
}

template <typename T>
ThroughputPrior<T> throughput_prior(const ThroughputParams<T>& q, const double* shares_frac, const int* batches,
                                    std::size_t tenants, double phi) {
  using std::pow;
  const T clock = pow(T(phi), q.clock_exponent);
  T isolated = T(0.0);
  for (std::size_t i = 0; i < tenants; ++i) {
    T fill, compute_s;
    tenant_compute(q, shares_frac[i], batches[i], clock, fill, compute_s);
    isolated += T(static_cast<double>(batches[i])) / (q.overhead_s + compute_s);
  }
  ThroughputPrior<T> r;
  r.demand = q.bandwidth_s * isolated;
  const T slowdown = pow(T(1.0) + pow(r.demand, kBandwidthSharpness), 1.0 / kBandwidthSharpness) *
                     (T(1.0) + q.interference * static_cast<double>(tenants - 1));
  r.throughput = T(0.0);
  r.activity = T(0.0);
  T idle = T(1.0);
  for (std::size_t i = 0; i < tenants; ++i) {
    T fill, compute_s;
    tenant_compute(q, shares_frac[i], batches[i], clock, fill, compute_s);
    const T stretched = compute_s * slowdown;
    const T latency = q.overhead_s + stretched;
    const T busy = stretched / latency;
    r.throughput += T(static_cast<double>(batches[i])) / latency;
    r.activity += fill * busy;
    idle *= T(1.0) - busy;
  }
  r.busy_union = T(1.0) - idle;
  r.traffic = q.bandwidth_s * r.throughput;
  return r;
}

template <typename T>
struct PowerParams {
  std::array<T, 4> static_w;  // s0 + s1·φ + s2·φ² + s3·φ³
  T sm_dynamic_w, clock_exponent, memory_dynamic_w;
};

template <typename T>
T power_prior(const PowerParams<T>& q, double phi, double activity, double traffic) {
  using std::pow;
  const T x = T(phi);
  return q.static_w[0] + x * (q.static_w[1] + x * (q.static_w[2] + x * q.static_w[3])) +
         q.sm_dynamic_w * activity * pow(x, q.clock_exponent) + q.memory_dynamic_w * traffic;
}

// Features of the residual regressors (same order as kFeatureNames in fitted.cpp).
inline constexpr std::size_t kFeatures = 10;

inline std::array<double, kFeatures> residual_features(const double* shares_frac, const int* batches,
                                                       std::size_t tenants, double phi,
                                                       const ThroughputPrior<double>& prior) {
  double total = 0.0, max_share = 0.0, min_share = 1e300;
  double log_b_sum = 0.0, max_log_b = -1e300, min_log_b = 1e300;
  for (std::size_t i = 0; i < tenants; ++i) {
    total += shares_frac[i];
    max_share = std::max(max_share, shares_frac[i]);
    min_share = std::min(min_share, shares_frac[i]);
    const double lb = std::log2(static_cast<double>(batches[i]));
    log_b_sum += lb;
    max_log_b = std::max(max_log_b, lb);
    min_log_b = std::min(min_log_b, lb);
  }
  const double n = static_cast<double>(tenants);
  return {phi, n, total, max_share, min_share, log_b_sum / n, max_log_b, min_log_b, prior.demand, prior.activity};
}

}  // namespace gpucap::predict::detail
