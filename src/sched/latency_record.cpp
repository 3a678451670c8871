#include "gpucap/sched/latency_record.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/sched/simulator.hpp"

namespace gpucap::sched {
namespace {

// Upper edges of the buckets: kSmallestS * (1 + kRelativeError)^i, up to the first >= kLargestS.
const std::vector<double>& upper_edges() {
  static const std::vector<double> edges = [] {
    std::vector<double> e;
    for (double edge = LatencyRecord::kSmallestS;; edge *= 1.0 + LatencyRecord::kRelativeError) {
      e.push_back(edge);
      if (edge >= LatencyRecord::kLargestS) break;
    }
    return e;
  }();
  return edges;
}

// The bucket whose range (edge[i-1], edge[i]] holds `seconds`; the last one also holds larger.
std::size_t bucket_of(double seconds) {
  const auto& edges = upper_edges();
  const auto it = std::lower_bound(edges.begin(), edges.end(), seconds);
  return it == edges.end() ? edges.size() - 1 : static_cast<std::size_t>(it - edges.begin());
}

}  // namespace

std::size_t LatencyRecord::bucket_count() { return upper_edges().size(); }

void LatencyRecord::add(double latency_s) {
  if (!std::isfinite(latency_s) || latency_s < 0.0) {
    throw Error(ErrorCode::internal, fmt::format("a latency of {} s", latency_s));
  }
  min_s_ = count_ == 0 ? latency_s : std::min(min_s_, latency_s);
  max_s_ = count_ == 0 ? latency_s : std::max(max_s_, latency_s);
  ++count_;
  sum_s_ += latency_s;
  if (slo_ms_ && latency_s * 1e3 <= *slo_ms_) ++within_slo_;
  if (exact() && samples_.size() < kExactSamples) {
    // Grown by doubling, but never past kExactSamples.
    if (samples_.size() == samples_.capacity()) {
      samples_.reserve(std::min(kExactSamples, std::max<std::size_t>(16, 2 * samples_.capacity())));
    }
    samples_.push_back(latency_s);
    return;
  }
  if (exact()) fold();
  ++histogram_[bucket_of(latency_s)];
}

void LatencyRecord::fold() {
  histogram_.assign(bucket_count(), 0);
  for (const double s : samples_) ++histogram_[bucket_of(s)];
  std::vector<double>().swap(samples_);  // frees them
}

double LatencyRecord::percentile(double p) const {
  if (count_ == 0) return 0.0;
  if (exact()) return nearest_rank_percentile(samples_, p);
  const auto rank = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(p / 100.0 * static_cast<double>(count_))), 1, count_);
  std::int64_t seen = 0;
  for (std::size_t i = 0; i < histogram_.size(); ++i) {
    seen += static_cast<std::int64_t>(histogram_[i]);
    if (seen >= rank) {
      // The last bucket also holds latencies past its edge: the exact maximum is the safe side.
      if (i + 1 == histogram_.size()) return max_s_;
      return std::clamp(upper_edges()[i], min_s_, max_s_);
    }
  }
  return max_s_;
}

std::size_t LatencyRecord::storage_bytes() const {
  return samples_.capacity() * sizeof(double) + histogram_.capacity() * sizeof(std::uint64_t);
}

}  // namespace gpucap::sched
