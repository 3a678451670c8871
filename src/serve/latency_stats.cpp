#include "gpucap/serve/latency_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "gpucap/core/error.hpp"

namespace gpucap::serve {

namespace {

// A ring slot's epoch before it first holds samples: never live.
constexpr std::int64_t kUnusedEpoch = std::numeric_limits<std::int64_t>::min();
// Far more slots than a window needs; the bound keeps a typo from allocating gigabytes.
constexpr int kMaxSlots = 10000;

double upper_edge_s(std::size_t bucket) {
  return LatencyStats::kSmallestLatencyS * std::pow(1.0 + LatencyStats::kRelativeError, static_cast<double>(bucket));
}

// Bucket b holds latencies in (upper_edge(b - 1), upper_edge(b)]; bucket 0 everything up to the
// smallest latency, the last bucket everything above the one before it.
std::size_t bucket_of(double latency_s) {
  const std::size_t last = LatencyStats::bucket_count() - 1;
  if (latency_s <= LatencyStats::kSmallestLatencyS) return 0;
  const double exact = std::log(latency_s / LatencyStats::kSmallestLatencyS) / std::log1p(LatencyStats::kRelativeError);
  auto bucket = static_cast<std::size_t>(std::clamp(std::ceil(exact), 1.0, static_cast<double>(last)));
  // The logarithm can round across an edge; step so that the bucket's edges really enclose the
  // value, which is what makes a reported percentile never lower than the true one.
  while (bucket < last && upper_edge_s(bucket) < latency_s) ++bucket;
  while (bucket > 1 && upper_edge_s(bucket - 1) >= latency_s) --bucket;
  return bucket;
}

// 1-based nearest rank. The small slack keeps 0.95 * 100 from rounding up to rank 96.
std::uint64_t nearest_rank(double quantile, std::uint64_t count) {
  const double rank = std::ceil(quantile * static_cast<double>(count) - 1e-9);
  return std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::max(rank, 1.0)), 1, count);
}

void require_finite_time(double time_s, const char* what) {
  if (!std::isfinite(time_s)) throw usage_error(fmt::format("LatencyStats: {} must be finite, not {}", what, time_s));
}

}  // namespace

void validate(const LatencyStatsConfig& config) {
  if (!std::isfinite(config.window_s) || config.window_s <= 0.0) {
    throw usage_error(fmt::format("window_s must be a finite number of seconds > 0, not {}", config.window_s));
  }
  if (config.slots < 1 || config.slots > kMaxSlots) {
    throw usage_error(fmt::format("slots must be in 1..{}, not {}", kMaxSlots, config.slots));
  }
  if (!std::isfinite(config.slo_s) || config.slo_s <= 0.0) {
    throw usage_error(fmt::format("slo_s must be a finite number of seconds > 0, not {}", config.slo_s));
  }
}

std::size_t LatencyStats::bucket_count() {
  static const std::size_t count = [] {
    const double span = std::log(kLargestLatencyS / kSmallestLatencyS) / std::log1p(kRelativeError);
    return static_cast<std::size_t>(std::ceil(span)) + 1;
  }();
  return count;
}

LatencyStats::LatencyStats(const LatencyStatsConfig& config) : config_(config), slot_s_(0.0) {
  validate(config);
  slot_s_ = config.window_s / config.slots;
  const auto n_slots = static_cast<std::size_t>(config.slots);
  slots_.assign(n_slots, Slot{});
  for (Slot& slot : slots_) slot.epoch = kUnusedEpoch;
  counts_.assign(n_slots * bucket_count(), 0);
}

std::int64_t LatencyStats::epoch_of(double time_s) const {
  return static_cast<std::int64_t>(std::floor(time_s / slot_s_));
}

std::size_t LatencyStats::position_of(std::int64_t epoch) const {
  const auto n = static_cast<std::int64_t>(slots_.size());
  return static_cast<std::size_t>(((epoch % n) + n) % n);  // epochs before time 0 are negative
}

void LatencyStats::reset(std::size_t position, std::int64_t epoch) {
  Slot& slot = slots_[position];
  slot = Slot{};
  slot.epoch = epoch;
  const auto row = static_cast<std::ptrdiff_t>(position * bucket_count());
  std::fill(counts_.begin() + row, counts_.begin() + row + static_cast<std::ptrdiff_t>(bucket_count()), 0U);
}

LatencyStats::Slot* LatencyStats::slot_for(double time_s) {
  const std::int64_t epoch = epoch_of(time_s);
  const std::size_t position = position_of(epoch);
  Slot& slot = slots_[position];
  if (slot.epoch > epoch) return nullptr;  // the ring has moved past it: older than the window
  if (slot.epoch != epoch) reset(position, epoch);
  return &slot;
}

void LatencyStats::record(double completion_s, double latency_s, bool ok) {
  require_finite_time(completion_s, "completion_s");
  if (!std::isfinite(latency_s) || latency_s < 0.0) {
    throw usage_error(fmt::format("LatencyStats: latency_s must be finite and >= 0, not {}", latency_s));
  }
  Slot* slot = slot_for(completion_s);
  if (slot == nullptr) return;
  if (!ok) {
    ++slot->failed;
    return;
  }
  if (slot->ok == 0 || latency_s < slot->min_s) slot->min_s = latency_s;
  if (slot->ok == 0 || latency_s > slot->max_s) slot->max_s = latency_s;
  ++slot->ok;
  slot->sum_s += latency_s;
  if (latency_s <= config_.slo_s) ++slot->within_slo;
  const auto position = static_cast<std::size_t>(slot - slots_.data());
  ++counts_[position * bucket_count() + bucket_of(latency_s)];
}

void LatencyStats::record_arrival(double now_s) {
  require_finite_time(now_s, "now_s");
  if (!first_arrival_s_ || now_s < *first_arrival_s_) first_arrival_s_ = now_s;
  if (Slot* slot = slot_for(now_s)) ++slot->arrivals;
}

bool LatencyStats::live(const Slot& slot, std::int64_t now_epoch) const {
  return slot.epoch != kUnusedEpoch && slot.epoch <= now_epoch &&
         slot.epoch > now_epoch - static_cast<std::int64_t>(slots_.size());
}

LatencyStats::Totals LatencyStats::totals(std::int64_t now_epoch) const {
  Totals totals;
  for (const Slot& slot : slots_) {
    if (!live(slot, now_epoch)) continue;
    totals.failed += slot.failed;
    totals.within_slo += slot.within_slo;
    totals.arrivals += slot.arrivals;
    if (slot.ok == 0) continue;
    if (totals.ok == 0 || slot.min_s < totals.min_s) totals.min_s = slot.min_s;
    if (totals.ok == 0 || slot.max_s > totals.max_s) totals.max_s = slot.max_s;
    totals.ok += slot.ok;
    totals.sum_s += slot.sum_s;
  }
  return totals;
}

void LatencyStats::fill_percentiles(std::int64_t now_epoch, const Totals& totals, const std::vector<double>& quantiles,
                                    std::vector<double>& values_s) const {
  values_s.assign(quantiles.size(), 0.0);
  if (totals.ok == 0) return;
  std::vector<std::uint64_t> ranks;
  for (const double q : quantiles) ranks.push_back(nearest_rank(q, totals.ok));
  std::vector<std::size_t> live_rows;
  for (std::size_t position = 0; position < slots_.size(); ++position) {
    if (live(slots_[position], now_epoch)) live_rows.push_back(position * bucket_count());
  }
  // One pass over the buckets, summing the live slots' counts: no merged copy is kept.
  std::vector<bool> done(ranks.size(), false);
  std::uint64_t seen = 0;
  std::size_t found = 0;
  for (std::size_t bucket = 0; bucket < bucket_count() && found < ranks.size(); ++bucket) {
    for (const std::size_t row : live_rows) seen += counts_[row + bucket];
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (done[i] || seen < ranks[i]) continue;
      values_s[i] = std::clamp(upper_edge_s(bucket), totals.min_s, totals.max_s);
      done[i] = true;
      ++found;
    }
  }
}

LatencySummary LatencyStats::summary(double now_s) const {
  require_finite_time(now_s, "now_s");
  const std::int64_t now_epoch = epoch_of(now_s);
  const Totals totals = this->totals(now_epoch);
  LatencySummary summary;
  summary.window_start_s = static_cast<double>(now_epoch - static_cast<std::int64_t>(slots_.size()) + 1) * slot_s_;
  summary.window_end_s = now_s;
  summary.ok = static_cast<std::size_t>(totals.ok);
  summary.failed = static_cast<std::size_t>(totals.failed);
  summary.within_slo = static_cast<std::size_t>(totals.within_slo);
  summary.arrivals = static_cast<std::size_t>(totals.arrivals);
  if (summary.answered() > 0) {
    summary.slo_attainment = static_cast<double>(totals.within_slo) / static_cast<double>(summary.answered());
  }
  if (totals.ok > 0) {
    std::vector<double> values_s;
    fill_percentiles(now_epoch, totals, {0.50, 0.95, 0.99}, values_s);
    summary.p50_s = values_s[0];
    summary.p95_s = values_s[1];
    summary.p99_s = values_s[2];
    summary.max_s = totals.max_s;
    summary.mean_s = totals.sum_s / static_cast<double>(totals.ok);
  }
  if (first_arrival_s_ && totals.arrivals > 0) {
    const double covered_s = now_s - std::max(summary.window_start_s, *first_arrival_s_);
    if (covered_s > 0.0) summary.arrival_rate_per_s = static_cast<double>(totals.arrivals) / covered_s;
  }
  return summary;
}

double LatencyStats::percentile_s(double quantile, double now_s) const {
  if (!(quantile > 0.0 && quantile <= 1.0)) {
    throw usage_error(fmt::format("LatencyStats: quantile must be in (0, 1], not {}", quantile));
  }
  require_finite_time(now_s, "now_s");
  const std::int64_t now_epoch = epoch_of(now_s);
  std::vector<double> values_s;
  fill_percentiles(now_epoch, totals(now_epoch), {quantile}, values_s);
  return values_s[0];
}

std::size_t LatencyStats::storage_bytes() const {
  return slots_.capacity() * sizeof(Slot) + counts_.capacity() * sizeof(std::uint32_t);
}

}  // namespace gpucap::serve
