#include "gpucap/tune/partition.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "gpucap/core/error.hpp"

namespace gpucap::tune {

namespace {

constexpr int kFullShare = 100;
constexpr int kBisectionSteps = 12;
constexpr double kCloseEnoughW = 1.0;  // SolveFreq stops when the predicted power is this close to the cap

// Predictions memoised per (tenants, SM clock, memory clock), as upstream does; counts the
// distinct ones.
class CachedPredictor {
 public:
  explicit CachedPredictor(const PartitionPredictor& predict) : predict_(predict) {}

  const PartitionPrediction& operator()(const std::vector<Tenant>& tenants, double sm_mhz, double memory_mhz) {
    Key key{tenants, sm_mhz, memory_mhz};
    const auto found = cache_.find(key);
    if (found != cache_.end()) return found->second;
    return cache_.emplace(std::move(key), predict_(tenants, sm_mhz, memory_mhz)).first->second;
  }
  [[nodiscard]] std::size_t calls() const { return cache_.size(); }

 private:
  struct Key {
    std::vector<Tenant> tenants;
    double sm_mhz;
    double memory_mhz;
    bool operator<(const Key& o) const {
      const auto flat = [](const Key& k) {
        std::vector<int> v;
        for (const auto& t : k.tenants) {
          v.push_back(t.share_pct);
          v.push_back(t.batch);
        }
        return v;
      };
      return std::tie(sm_mhz, memory_mhz) < std::tie(o.sm_mhz, o.memory_mhz) ||
             (std::tie(sm_mhz, memory_mhz) == std::tie(o.sm_mhz, o.memory_mhz) && flat(*this) < flat(o));
    }
  };
  const PartitionPredictor& predict_;
  std::map<Key, PartitionPrediction> cache_;
};

struct Search {
  const PartitionSpace& space;
  CachedPredictor predict;
  double cap_w;
  std::size_t configurations = 0;

  // The highest supported SM clock at or below `mhz`; nullopt if there is none.
  [[nodiscard]] std::optional<double> supported_at_or_below(double mhz) const {
    std::optional<double> best;
    for (const double c : space.sm_clocks_mhz) {
      if (c <= mhz + 1e-9 && (!best || c > *best)) best = c;
    }
    return best;
  }

  // SolveFreq (§2.7): the highest SM clock whose predicted power fits the cap, searched in
  // [low bound, high] — high is the bisection's upper bound when `raise`, else min(f_high, bound).
  std::optional<double> solve_frequency(const std::vector<Tenant>& tenants, double memory_mhz, double f_high,
                                        bool raise) {
    ++configurations;
    const auto power = [&](double f) { return predict(tenants, f, memory_mhz).power_w; };
    double hi = raise ? space.bisection_high_mhz : std::min(f_high, space.bisection_high_mhz);
    double lo = space.bisection_low_mhz;
    const double p_lo = power(lo);
    if (p_lo > cap_w) return std::nullopt;
    const double p_hi = power(hi);
    if (p_hi < cap_w) return supported_at_or_below(hi);
    // A linear guess, and a bracket around it if the cap lies inside.
    const double guess = p_hi > p_lo ? lo + (cap_w - p_lo) / (p_hi - p_lo) * (hi - lo) : hi;
    const double width = std::max(100.0, 0.2 * (hi - lo));
    const double a = std::max(lo, guess - width), b = std::min(hi, guess + width);
    if (power(a) <= cap_w && power(b) >= cap_w) {
      lo = a;
      hi = b;
    }
    for (int step = 0; step < kBisectionSteps; ++step) {
      const double mid = 0.5 * (lo + hi);
      const double p = power(mid);
      // Upstream stops at |P − cap| <= 1 W, which can return a clock up to 1 W over the cap;
      // gpucap stops only under it (docs/algorithms.md).
      if (p <= cap_w && cap_w - p <= kCloseEnoughW) return mid;  // unsnapped, as upstream
      (p > cap_w ? hi : lo) = mid;
    }
    return supported_at_or_below(lo);
  }

  struct Clocks {
    double sm_mhz = 0.0;
    double memory_mhz = 0.0;
    double throughput = 0.0;
  };

  // The best (f*, m) over the memory clocks at or below `memory_max`.
  std::optional<Clocks> best_clocks(const std::vector<Tenant>& tenants, double f_high, double memory_max) {
    std::optional<Clocks> best;
    for (const double m : space.memory_clocks_mhz) {
      if (m > memory_max) continue;
      const auto f = solve_frequency(tenants, m, f_high, /*raise=*/m < memory_max);
      if (!f) continue;
      const double t = predict(tenants, *f, m).throughput_img_s;
      if (!best || t > best->throughput) best = Clocks{*f, m, t};
    }
    return best;
  }

  Partition partition(std::vector<Tenant> tenants, const Clocks& clocks) {
    Partition p;
    p.tenants = std::move(tenants);
    p.sm_clock_mhz = clocks.sm_mhz;
    p.memory_clock_mhz = clocks.memory_mhz;
    p.predicted = predict(p.tenants, clocks.sm_mhz, clocks.memory_mhz);
    return p;
  }
};

}  // namespace

void PartitionSpace::validate() const {
  if (sm_clocks_mhz.empty()) throw usage_error("partition: no SM clocks");
  if (memory_clocks_mhz.empty()) throw usage_error("partition: no memory clocks");
  if (mps_step_pct < 1 || mps_step_pct > kFullShare || kFullShare % mps_step_pct != 0) {
    throw usage_error(fmt::format("--mps-step {} must divide 100 (1, 2, 4, 5, 10, 20, 25, 50 or 100)", mps_step_pct));
  }
  if (batch_pool.empty() || max_batch < 1) throw usage_error("partition: no batch sizes");
  if (!(bisection_low_mhz > 0.0 && bisection_high_mhz > bisection_low_mhz)) {
    throw usage_error("partition: the SM clock bounds must be increasing and positive");
  }
}

std::vector<int> PartitionSpace::batches_for(int share_pct) const {
  const int low = std::max(4, static_cast<int>(std::floor(0.8 * share_pct)));
  const int high = std::min(max_batch, static_cast<int>(std::floor(6.4 * share_pct)));
  std::vector<int> out;
  for (const int b : batch_pool) {
    if (b >= low && b <= high) out.push_back(b);
  }
  if (out.empty()) {
    const auto closest = std::min_element(batch_pool.begin(), batch_pool.end(), [low](int a, int b) {
      return std::abs(a - low) < std::abs(b - low);
    });
    out.push_back(*closest);
  }
  return out;
}

PartitionSearch greedy_partition(const PartitionSpace& space, const PartitionPredictor& predict, double cap_w) {
  space.validate();
  Search search{space, CachedPredictor(predict), cap_w};
  std::vector<Tenant> tenants;
  int free = kFullShare;
  double f = *std::max_element(space.sm_clocks_mhz.begin(), space.sm_clocks_mhz.end());
  double m = *std::max_element(space.memory_clocks_mhz.begin(), space.memory_clocks_mhz.end());
  std::optional<Search::Clocks> clocks;
  while (free >= space.mps_step_pct) {
    // FindBestNext: the tenant with the highest throughput gain per share.
    const double base = tenants.empty() ? 0.0 : search.predict(tenants, f, m).throughput_img_s;
    std::optional<Tenant> best;
    std::optional<Search::Clocks> best_clocks;
    double best_density = -std::numeric_limits<double>::infinity();
    for (int share = space.mps_step_pct; share <= free; share += space.mps_step_pct) {
      for (const int batch : space.batches_for(share)) {
        auto candidate = tenants;
        candidate.push_back(Tenant{share, batch});
        const auto c = search.best_clocks(candidate, f, m);
        if (!c) continue;
        const double density = (c->throughput - base) / share;  // upstream keeps it even if negative
        if (density > best_density) {
          best_density = density;
          best = Tenant{share, batch};
          best_clocks = c;
        }
      }
    }
    if (!best) break;
    tenants.push_back(*best);
    free -= best->share_pct;
    f = best_clocks->sm_mhz;
    m = best_clocks->memory_mhz;
    clocks = best_clocks;
  }
  PartitionSearch result;
  if (tenants.empty()) {
    result.predictor_calls = search.predict.calls();
    result.configurations = search.configurations;
    return result;
  }
  if (free > 0) {
    // The leftover share, in steps, round-robin in admission order; then the clocks once more.
    auto topped = tenants;
    for (std::size_t i = 0; free >= space.mps_step_pct; ++i, free -= space.mps_step_pct) {
      topped[i % topped.size()].share_pct += space.mps_step_pct;
    }
    if (const auto c = search.best_clocks(topped, f, m)) {
      tenants = std::move(topped);
      clocks = c;
    }
  }
  result.best = search.partition(tenants, *clocks);
  result.predictor_calls = search.predict.calls();
  result.configurations = search.configurations;
  return result;
}

namespace {

// Calls visit(tenants) for every non-empty multiset in non-increasing (share, batch) order.
void enumerate(const PartitionSpace& space, std::vector<Tenant>& tenants, int free, std::size_t max_tenants,
               const std::function<void(const std::vector<Tenant>&)>& visit) {
  if (max_tenants > 0 && tenants.size() >= max_tenants) return;
  for (int share = std::min(free, tenants.empty() ? kFullShare : tenants.back().share_pct); share >= space.mps_step_pct;
       share -= space.mps_step_pct) {
    for (const int batch : space.batches_for(share)) {
      if (!tenants.empty() && share == tenants.back().share_pct && batch > tenants.back().batch) continue;
      tenants.push_back(Tenant{share, batch});
      visit(tenants);
      enumerate(space, tenants, free - share, max_tenants, visit);
      tenants.pop_back();
    }
  }
}

}  // namespace

PartitionSearch greedy_partition_vectorised(const PartitionSpace& space, const PartitionCurvePredictor& predict,
                                            double cap_w) {
  // Curves memoised per (tenants, memory clock); the greedy search asks them for every clock.
  std::map<std::pair<std::vector<std::pair<int, int>>, double>, PartitionCurve> curves;
  const PartitionPredictor at_clock = [&](const std::vector<Tenant>& tenants, double f, double m) {
    std::vector<std::pair<int, int>> key;
    key.reserve(tenants.size());
    for (const auto& t : tenants) key.emplace_back(t.share_pct, t.batch);
    auto found = curves.find({key, m});
    if (found == curves.end()) found = curves.emplace(std::make_pair(std::move(key), m), predict(tenants, m)).first;
    return found->second(f);
  };
  auto result = greedy_partition(space, at_clock, cap_w);
  result.curves = curves.size();
  return result;
}

PartitionSearch exhaustive_partition(const PartitionSpace& space, const PartitionPredictor& predict, double cap_w) {
  space.validate();
  Search search{space, CachedPredictor(predict), cap_w};
  std::optional<Partition> best;
  std::vector<Tenant> tenants;
  enumerate(space, tenants, kFullShare, space.max_tenants, [&](const std::vector<Tenant>& set) {
    for (const double m : space.memory_clocks_mhz) {
      const auto f = search.solve_frequency(set, m, space.bisection_high_mhz, /*raise=*/true);
      if (!f) continue;
      const auto& p = search.predict(set, *f, m);
      if (!best || p.throughput_img_s > best->predicted.throughput_img_s) {
        best = Partition{set, *f, m, p};
      }
    }
  });
  PartitionSearch result;
  result.best = best;
  result.predictor_calls = search.predict.calls();
  result.configurations = search.configurations;
  return result;
}

namespace {

// Tenants in canonical order (share, then batch, descending), so that equal sets share a cache entry.
std::vector<Tenant> canonical(std::vector<Tenant> tenants) {
  std::sort(tenants.begin(), tenants.end(), [](const Tenant& a, const Tenant& b) {
    return std::tie(a.share_pct, a.batch) > std::tie(b.share_pct, b.batch);
  });
  return tenants;
}

// The pool's batch sizes next to `batch` (below and above), within the space's batch cap.
std::vector<int> neighbour_batches(const PartitionSpace& space, int batch) {
  std::vector<int> pool;
  for (const int b : space.batch_pool) {
    if (b <= space.max_batch) pool.push_back(b);
  }
  std::vector<int> out;
  const auto at = std::lower_bound(pool.begin(), pool.end(), batch);
  if (at != pool.begin()) out.push_back(*std::prev(at));
  const auto above = std::upper_bound(pool.begin(), pool.end(), batch);
  if (above != pool.end()) out.push_back(*above);
  return out;
}

// Partitions one move away: a tenant's batch one pool step up or down; one share step moved
// between two tenants or taken from the free share; two tenants merged; a tenant split in two.
std::vector<std::vector<Tenant>> neighbours(const PartitionSpace& space, const std::vector<Tenant>& tenants) {
  const int step = space.mps_step_pct;
  int used = 0;
  for (const auto& t : tenants) used += t.share_pct;
  std::vector<std::vector<Tenant>> out;
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    for (const int b : neighbour_batches(space, tenants[i].batch)) {
      auto n = tenants;
      n[i].batch = b;
      out.push_back(n);
    }
    if (used + step <= kFullShare) {
      auto n = tenants;
      n[i].share_pct += step;
      out.push_back(n);
    }
    for (std::size_t j = 0; j < tenants.size(); ++j) {
      if (j == i || tenants[j].share_pct <= step) continue;
      auto n = tenants;
      n[i].share_pct += step;
      n[j].share_pct -= step;
      out.push_back(n);
    }
    if (tenants[i].share_pct >= 2 * step) {
      const int half = tenants[i].share_pct / (2 * step) * step;
      auto n = tenants;
      n[i].share_pct -= half;
      n.push_back(Tenant{half, tenants[i].batch});
      out.push_back(n);
    }
    for (std::size_t j = i + 1; j < tenants.size(); ++j) {
      auto n = tenants;
      n[i].share_pct += n[j].share_pct;
      n[i].batch = std::max(n[i].batch, n[j].batch);
      n.erase(n.begin() + static_cast<std::ptrdiff_t>(j));
      out.push_back(n);
    }
  }
  for (auto& n : out) n = canonical(std::move(n));
  return out;
}

bool admissible(const PartitionSpace& space, const std::vector<Tenant>& tenants) {
  return std::all_of(tenants.begin(), tenants.end(), [&space](const Tenant& t) {
    const auto batches = space.batches_for(t.share_pct);
    return std::find(batches.begin(), batches.end(), t.batch) != batches.end();
  });
}

}  // namespace

PartitionSearch local_search_partition(const PartitionSpace& space, const PartitionPredictor& predict, double cap_w) {
  space.validate();
  Search search{space, CachedPredictor(predict), cap_w};
  std::optional<Partition> best;
  const auto consider = [&](const std::vector<Tenant>& tenants) {
    if (space.admissible_batches_only && !admissible(space, tenants)) return false;
    const auto clocks = search.best_clocks(tenants, space.bisection_high_mhz,
                                           *std::max_element(space.memory_clocks_mhz.begin(),
                                                             space.memory_clocks_mhz.end()) + 1.0);
    if (!clocks || (best && clocks->throughput <= best->predicted.throughput_img_s)) return false;
    best = search.partition(tenants, *clocks);
    return true;
  };
  // Seeds: 1 to 4 equal tenants over the whole GPU, every admissible batch size.
  for (int n = 1; n <= 4; ++n) {
    const int share = kFullShare / n / space.mps_step_pct * space.mps_step_pct;
    if (share < space.mps_step_pct) break;
    for (const int batch : space.batches_for(share)) {
      std::vector<Tenant> tenants(static_cast<std::size_t>(n), Tenant{share, batch});
      tenants.front().share_pct += kFullShare - share * n;  // the rounding remainder
      (void)consider(canonical(tenants));
    }
  }
  // Hill climbing: the best improving move, until none improves.
  while (best) {
    const auto current = best->tenants;
    bool improved = false;
    for (const auto& n : neighbours(space, current)) improved = consider(n) || improved;
    if (!improved) break;
  }
  PartitionSearch result;
  result.best = best;
  result.predictor_calls = search.predict.calls();
  result.configurations = search.configurations;
  return result;
}

std::string describe(const std::vector<Tenant>& tenants) {
  std::string out;
  for (const auto& t : tenants) out += fmt::format("{}{}%×b{}", out.empty() ? "" : " + ", t.share_pct, t.batch);
  return out;
}

}  // namespace gpucap::tune
