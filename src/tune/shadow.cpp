#include "gpucap/tune/shadow.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/tune/acquisition.hpp"

namespace gpucap::tune {

namespace {

constexpr int kFullShare = 100;
// Feature scales: the unit cube for the GP's length scales.
constexpr double kClockScaleMhz = 2100.0;
constexpr double kMemoryScaleMhz = 10000.0;
constexpr double kBatchScale = 256.0;

int total_share(const std::vector<Tenant>& tenants) {
  int total = 0;
  for (const auto& t : tenants) total += t.share_pct;
  return total;
}

std::size_t largest(const std::vector<Tenant>& tenants, std::optional<std::size_t> except = std::nullopt) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    if (i == except) continue;
    if (!best || tenants[i].share_pct > tenants[*best].share_pct) best = i;
  }
  return best.value_or(0);
}

}  // namespace

std::vector<int> shadow_batch_pool() {
  std::vector<int> pool = {1, 2, 4, 8};
  for (int b = 12; b <= 256; b += 4) pool.push_back(b);
  return pool;
}

ShadowOptimizer::ShadowOptimizer(ShadowParams params, PartitionPredictor predict)
    : params_(std::move(params)), predict_(std::move(predict)) {
  if (params_.mps_step_pct < 1 || kFullShare % params_.mps_step_pct != 0) {
    throw usage_error(fmt::format("shadow optimizer: --mps-step {} must divide 100", params_.mps_step_pct));
  }
  if (params_.batch_pool.empty() || params_.history < 2 || params_.refit_every < 1) {
    throw usage_error("shadow optimizer: empty batch pool, or a history shorter than 2 points");
  }
}

std::vector<int> ShadowOptimizer::ladder(int share_pct) const {
  // §2.7's admissible range for a share, on the shadow optimizer's finer pool.
  const int low = std::max(4, static_cast<int>(std::floor(0.8 * share_pct)));
  const int high = std::min(params_.max_batch, static_cast<int>(std::floor(6.4 * share_pct)));
  std::vector<int> out;
  for (const int b : params_.batch_pool) {
    if (b >= low && b <= high) out.push_back(b);
  }
  if (out.empty()) out.push_back(std::clamp(low, params_.batch_pool.front(), params_.max_batch));
  return out;
}

std::vector<std::vector<Tenant>> ShadowOptimizer::candidates(const std::vector<Tenant>& current) const {
  const int step = params_.mps_step_pct;
  std::vector<std::vector<Tenant>> out;
  const auto add = [&](std::vector<Tenant> tenants) {
    if (tenants.empty()) return;
    for (const auto& t : tenants) {
      if (t.share_pct < step || t.batch < 1) return;
    }
    if (total_share(tenants) > kFullShare || tenants == current) return;
    if (std::find(out.begin(), out.end(), tenants) == out.end()) out.push_back(std::move(tenants));
  };
  // Keep N: one share step to or from a tenant, taken from or given to the largest other one.
  for (std::size_t i = 0; i < current.size() && current.size() > 1; ++i) {
    const std::size_t donor = largest(current, i);
    for (const int delta : {step, -step}) {
      auto n = current;
      n[i].share_pct += delta;
      n[donor].share_pct -= delta;
      add(n);
    }
  }
  // Keep N: one tenant's batch up to batch_steps ladder steps either way.
  for (std::size_t i = 0; i < current.size(); ++i) {
    const auto sizes = ladder(current[i].share_pct);
    const auto at = std::lower_bound(sizes.begin(), sizes.end(), current[i].batch) - sizes.begin();
    for (int k = -params_.batch_steps; k <= params_.batch_steps; ++k) {
      const auto j = at + k;
      if (k == 0 || j < 0 || j >= static_cast<std::ptrdiff_t>(sizes.size())) continue;
      auto n = current;
      n[i].batch = sizes[static_cast<std::size_t>(j)];
      add(n);
    }
  }
  // N − 1: the two smallest merged, the larger batch kept.
  if (current.size() > 1) {
    std::vector<std::size_t> order(current.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return current[a].share_pct < current[b].share_pct; });
    auto n = current;
    n[order[0]].share_pct += n[order[1]].share_pct;
    n[order[0]].batch = std::max(n[order[0]].batch, n[order[1]].batch);
    n.erase(n.begin() + static_cast<std::ptrdiff_t>(order[1]));
    add(n);
  }
  // N + 1: the largest split into ⌊half/step⌋·step and the rest.
  {
    const std::size_t big = largest(current);
    const int half = current[big].share_pct / 2 / step * step;
    if (half >= step) {
      auto n = current;
      n[big].share_pct -= half;
      n.push_back(Tenant{half, current[big].batch});
      add(n);
    }
  }
  return out;
}

std::vector<double> ShadowOptimizer::features(const ShadowPoint& point) const {
  const auto& tenants = point.tenants;
  const auto n = static_cast<double>(tenants.size());
  double mean_b = 0.0;
  for (const auto& t : tenants) mean_b += t.batch;
  mean_b /= std::max(n, 1.0);
  double var_b = 0.0;
  for (const auto& t : tenants) var_b += (t.batch - mean_b) * (t.batch - mean_b);
  var_b /= std::max(n, 1.0);
  std::vector<double> x = {point.sm_clock_mhz / kClockScaleMhz, point.memory_clock_mhz / kMemoryScaleMhz,
                           n / static_cast<double>(feature_tenants_), mean_b / kBatchScale,
                           var_b / (kBatchScale * kBatchScale)};
  // Shares then batches, zero-padded (or cut) to K tenants.
  for (std::size_t i = 0; i < feature_tenants_; ++i) x.push_back(i < tenants.size() ? tenants[i].share_pct / 100.0 : 0.0);
  for (std::size_t i = 0; i < feature_tenants_; ++i) x.push_back(i < tenants.size() ? tenants[i].batch / kBatchScale : 0.0);
  return x;
}

void ShadowOptimizer::update(const ShadowPoint& point, double measured_img_s, double measured_max_w) {
  if (feature_tenants_ == 0) feature_tenants_ = params_.max_tenants > 0 ? params_.max_tenants : point.tenants.size() + 1;
  const auto predicted = predict_(point.tenants, point.sm_clock_mhz, point.memory_clock_mhz);
  inputs_.push_back(features(point));
  throughput_residuals_.push_back(measured_img_s - predicted.throughput_img_s);
  power_residuals_.push_back(measured_max_w - predicted.power_w);
  if (inputs_.size() > params_.history) {
    inputs_.erase(inputs_.begin());
    throughput_residuals_.erase(throughput_residuals_.begin());
    power_residuals_.erase(power_residuals_.begin());
  }
  ++updates_;
  if (updates_ % static_cast<std::size_t>(params_.refit_every) == 0) refit();
}

void ShadowOptimizer::refit() {
  GpOptions options;
  options.jitter = 1e-3;  // sklearn's alpha on normalised targets
  throughput_gp_ = GaussianProcess::fit(inputs_, throughput_residuals_, options);
  power_gp_ = GaussianProcess::fit(inputs_, power_residuals_, options);
}

double ShadowOptimizer::threshold() const {
  if (!params_.adaptive_threshold) return params_.fixed_threshold;
  const double progress = static_cast<double>(updates_) / params_.adaptive_horizon;
  if (progress < 1.0 / 3.0) return -0.10 * (1.0 - 3.0 * progress);
  // Upstream writes 0.02·(1 − e^(−4x)) without defining x; here x runs from 0 at a third of the
  // horizon to 1 at its end.
  const double x = (progress - 1.0 / 3.0) / (2.0 / 3.0);
  return 0.02 * (1.0 - std::exp(-4.0 * x));
}

std::optional<ShadowProposal> ShadowOptimizer::propose(const ShadowPoint& current, double current_img_s,
                                                       double cap_w) const {
  if (!throughput_gp_ || !power_gp_) return std::nullopt;
  std::optional<ShadowProposal> best;
  for (const auto& tenants : candidates(current.tenants)) {
    const ShadowPoint point{tenants, current.sm_clock_mhz, current.memory_clock_mhz};
    const auto predicted = predict_(tenants, point.sm_clock_mhz, point.memory_clock_mhz);
    const auto x = features(point);
    const auto dt = throughput_gp_->predict(x);
    const auto dp = power_gp_->predict(x);
    const double mean_t = predicted.throughput_img_s + dt.mean;
    const double mean_p = predicted.power_w + dp.mean;
    const double score = expected_improvement(mean_t, std::sqrt(std::max(dt.variance, 0.0)), current_img_s) *
                         probability_feasible(cap_w - mean_p, std::sqrt(std::max(dp.variance, 0.0)));
    if (!best || score > best->score) best = ShadowProposal{tenants, mean_t, mean_p, score, threshold()};
  }
  if (!best || !(best->expected_img_s - current_img_s > best->threshold * std::max(current_img_s, 1.0))) {
    return std::nullopt;
  }
  return best;
}

}  // namespace gpucap::tune
