#include "gpucap/tune/space.hpp"

#include <fmt/format.h>

#include <algorithm>

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
