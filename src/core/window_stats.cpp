#include "gpucap/core/window_stats.hpp"

#include <algorithm>
#include <cmath>

namespace gpucap {

namespace {
constexpr double kBinW = 0.1;
constexpr std::size_t kBins = 40000;  // 0..4000 W; larger values share the last bin (max stays exact)

std::size_t bin_of(double power_w) {
  if (!(power_w > 0.0)) return 0;
  return std::min(kBins - 1, static_cast<std::size_t>(power_w / kBinW));
}

std::size_t nearest_rank_95(std::size_t count) {
  const auto rank = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(count)));
  return std::clamp<std::size_t>(rank, 1, count);  // 1-based
}
}  // namespace

void WindowAccumulator::add(double power_w) {
  if (count_ == 0 || power_w > max_w_) max_w_ = power_w;
  sum_w_ += power_w;
  ++count_;
  if (histogram_.empty()) {
    values_.push_back(power_w);
    if (values_.size() > kExactSamples) spill_to_histogram();
  } else {
    ++histogram_[bin_of(power_w)];
  }
}

void WindowAccumulator::spill_to_histogram() {
  histogram_.assign(kBins, 0);
  for (const double v : values_) ++histogram_[bin_of(v)];
  values_.clear();
  values_.shrink_to_fit();
}

void WindowAccumulator::reset() {
  count_ = 0;
  sum_w_ = 0.0;
  max_w_ = 0.0;
  values_.clear();
  histogram_.clear();
}

double WindowAccumulator::p95_w() const {
  const auto rank = nearest_rank_95(count_);
  if (histogram_.empty()) {
    std::vector<double> copy = values_;
    const auto index = static_cast<std::ptrdiff_t>(rank - 1);
    std::nth_element(copy.begin(), copy.begin() + index, copy.end());
    return copy[static_cast<std::size_t>(index)];
  }
  std::size_t seen = 0;
  for (std::size_t b = 0; b < kBins; ++b) {
    seen += histogram_[b];
    if (seen >= rank) return std::min(max_w_, (static_cast<double>(b) + 1.0) * kBinW);
  }
  return max_w_;
}

WindowStats WindowAccumulator::stats(double start_s, double end_s) const {
  WindowStats stats;
  stats.start_s = start_s;
  stats.end_s = end_s;
  stats.samples = count_;
  if (count_ == 0) return stats;
  stats.max_w = max_w_;
  stats.mean_w = sum_w_ / static_cast<double>(count_);
  stats.p95_w = p95_w();
  return stats;
}

}  // namespace gpucap
