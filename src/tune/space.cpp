#include "gpucap/tune/space.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::tune {

std::string describe(const ConfigPoint& point) {
  auto text = fmt::format("batch={} sm={:g}MHz", point.batch_size, point.sm_clock_mhz);
  if (point.memory_clock_mhz) text += fmt::format(" mem={:g}MHz", *point.memory_clock_mhz);
  return text;
}

std::size_t SearchSpace::size() const {
  return batch_sizes.size() * sm_clocks_mhz.size() * std::max<std::size_t>(1, memory_clocks_mhz.size());
}

ConfigPoint SearchSpace::point(std::size_t index) const {
  if (index >= size()) throw Error(ErrorCode::internal, fmt::format("search space: point {} of {}", index, size()));
  ConfigPoint p;
  p.batch_size = batch_sizes[index % batch_sizes.size()];
  index /= batch_sizes.size();
  p.sm_clock_mhz = sm_clocks_mhz[index % sm_clocks_mhz.size()];
  index /= sm_clocks_mhz.size();
  if (!memory_clocks_mhz.empty()) p.memory_clock_mhz = memory_clocks_mhz[index];
  return p;
}

namespace {

std::optional<std::size_t> find_clock(const std::vector<double>& clocks_mhz, double mhz) {
  for (std::size_t i = 0; i < clocks_mhz.size(); ++i) {
    if (std::abs(clocks_mhz[i] - mhz) < 1e-6) return i;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::size_t> SearchSpace::index_of(const ConfigPoint& p) const {
  const auto batch = std::find(batch_sizes.begin(), batch_sizes.end(), p.batch_size);
  const auto clock = find_clock(sm_clocks_mhz, p.sm_clock_mhz);
  if (batch == batch_sizes.end() || !clock) return std::nullopt;
  std::size_t memory = 0;
  if (memory_clocks_mhz.empty() != !p.memory_clock_mhz.has_value()) return std::nullopt;
  if (p.memory_clock_mhz) {
    const auto found = find_clock(memory_clocks_mhz, *p.memory_clock_mhz);
    if (!found) return std::nullopt;
    memory = *found;
  }
  const auto batch_index = static_cast<std::size_t>(batch - batch_sizes.begin());
  return batch_index + batch_sizes.size() * (*clock + sm_clocks_mhz.size() * memory);
}

namespace {

template <typename T>
void check_axis(const std::vector<T>& values, const char* name, T lowest, bool may_be_empty) {
  if (values.empty() && !may_be_empty) throw usage_error(fmt::format("search space: no {}", name));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!(values[i] >= lowest)) throw usage_error(fmt::format("search space: {} {} is out of range", name, values[i]));
    if (i > 0 && !(values[i] > values[i - 1])) {
      throw usage_error(fmt::format("search space: {} must be increasing without repeats ({} after {})", name,
                                    values[i], values[i - 1]));
    }
  }
}

}  // namespace

void SearchSpace::validate() const {
  check_axis(batch_sizes, "batch sizes", 1, false);
  check_axis(sm_clocks_mhz, "SM clocks", 1e-9, false);
  check_axis(memory_clocks_mhz, "memory clocks", 1e-9, true);
}

bool improves(const TrialResult& result, const std::optional<Trial>& best, double cap_w) {
  return feasible(result, cap_w) && (!best || result.throughput_img_s > best->result.throughput_img_s);
}

std::optional<Trial> best_feasible(const std::vector<Trial>& trials, double cap_w) {
  std::optional<Trial> best;
  for (const auto& trial : trials) {
    if (improves(trial.result, best, cap_w)) best = trial;
  }
  return best;
}

}  // namespace gpucap::tune
