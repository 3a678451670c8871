#include "gpucap/tune/bobd.hpp"

#include <boost/random/sobol.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "gpucap/core/error.hpp"
#include "gpucap/tune/acquisition.hpp"

namespace gpucap::tune {

namespace {

// How many Sobol points the initial design may draw before giving up on finding an unvisited
// grid point (a tiny space can snap many of them onto visited points).
constexpr std::size_t kMaxDesignDraws = 1024;

// Each value's position in [0, 1] between the axis' first and last value; a single value is 0.
template <typename T>
std::vector<double> unit_positions(const std::vector<T>& values, bool logarithmic) {
  const auto transform = [logarithmic](T v) {
    return logarithmic ? std::log(static_cast<double>(v)) : static_cast<double>(v);
  };
  std::vector<double> positions(values.size(), 0.0);
  if (values.size() < 2) return positions;
  const double low = transform(values.front());
  const double span = transform(values.back()) - low;
  for (std::size_t i = 0; i < values.size(); ++i) positions[i] = (transform(values[i]) - low) / span;
  return positions;
}

std::size_t nearest(const std::vector<double>& positions, double u) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < positions.size(); ++i) {
    if (std::abs(positions[i] - u) < std::abs(positions[best] - u)) best = i;
  }
  return best;
}

}  // namespace

BobdTuner::BobdTuner(SearchSpace space, double cap_w, BobdOptions options)
    : space_(std::move(space)), cap_w_(cap_w), options_(std::move(options)) {
  space_.validate();
  if (!(cap_w_ > 0.0) || !std::isfinite(cap_w_)) {
    throw usage_error(fmt::format("bobd: the cap {} W is not a positive number", cap_w_));
  }
  if (options_.initial_design < 1) throw usage_error("bobd: the initial design needs at least one point");
  axis_coordinates_ = {unit_positions(space_.batch_sizes, options_.batch_scale == BatchScale::log),
                       unit_positions(space_.sm_clocks_mhz, false),
                       space_.memory_clocks_mhz.empty() ? std::vector<double>{0.0}
                                                        : unit_positions(space_.memory_clocks_mhz, false)};
  const std::size_t batches = space_.batch_sizes.size();
  const std::size_t clocks = space_.sm_clocks_mhz.size();
  coordinates_.resize(space_.size());
  for (std::size_t index = 0; index < space_.size(); ++index) {
    const std::size_t axis_index[3] = {index % batches, (index / batches) % clocks, index / (batches * clocks)};
    for (std::size_t axis = 0; axis < 3; ++axis) {
      // An axis with one value carries no information; leaving it out keeps the GP's dimension honest.
      if (axis_coordinates_[axis].size() > 1) coordinates_[index].push_back(axis_coordinates_[axis][axis_index[axis]]);
    }
  }
  visited_.assign(space_.size(), false);
}

std::size_t BobdTuner::snap_to_grid(const std::vector<double>& unit_point) const {
  std::size_t axis_index[3] = {0, 0, 0};
  std::size_t dimension = 0;
  for (std::size_t axis = 0; axis < 3; ++axis) {
    if (axis_coordinates_[axis].size() > 1) {
      axis_index[axis] = nearest(axis_coordinates_[axis], unit_point[dimension++]);
    }
  }
  return axis_index[0] + space_.batch_sizes.size() * (axis_index[1] + space_.sm_clocks_mhz.size() * axis_index[2]);
}

// The Sobol sequence with a digital shift (each coordinate's bits XORed with a seeded random
// mask): the shifted sequence keeps Sobol's stratification, and the seed varies the design.
// Boost's generator starts after the sequence's first point, the origin, so that point is put
// back: points 0 and 1 then lie in opposite halves of every axis.
std::optional<std::size_t> BobdTuner::next_design_point() const {
  const std::size_t dimensions = coordinates_.front().size();
  if (dimensions == 0) return visited_[0] ? std::nullopt : std::optional<std::size_t>(0);
  std::mt19937_64 shift_source(options_.seed);
  std::vector<std::uint64_t> shift(dimensions);
  for (auto& s : shift) s = shift_source();
  boost::random::sobol sobol(dimensions);
  std::vector<std::uint64_t> raw(dimensions, 0);
  std::vector<double> unit(dimensions);
  for (std::size_t draw = 0; draw < kMaxDesignDraws; ++draw) {
    if (draw > 0) {
      for (auto& r : raw) r = sobol();
    }
    for (std::size_t d = 0; d < dimensions; ++d) unit[d] = std::ldexp(static_cast<double>(raw[d] ^ shift[d]), -64);
    const auto index = snap_to_grid(unit);
    if (!visited_[index]) return index;
  }
  return std::nullopt;
}

// Constrained EI (Gardner et al. 2014, as Spearmint): EI over the best feasible throughput times
// P(cap − max power ≥ 0); before anything is feasible, P(feasible) alone. The space is a finite
// grid, so the maximum is exact — every unvisited point is scored — where Spearmint scored a
// 20,000-point Sobol grid and refined the best 20 with L-BFGS-B in a continuous relaxation.
std::size_t BobdTuner::most_promising_point() {
  const auto objective = GaussianProcess::fit(observed_inputs_, observed_throughput_img_s_, options_.gp,
                                              objective_warm_start_ ? &*objective_warm_start_ : nullptr);
  const auto constraint = GaussianProcess::fit(observed_inputs_, observed_constraint_w_, options_.gp,
                                               constraint_warm_start_ ? &*constraint_warm_start_ : nullptr);
  objective_warm_start_ = objective.hyperparameters();
  constraint_warm_start_ = constraint.hyperparameters();

  std::optional<std::size_t> best_index;
  double best_score = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < coordinates_.size(); ++i) {
    if (visited_[i]) continue;
    const auto c = constraint.predict(coordinates_[i]);
    double score = log_probability_feasible(c.mean, std::sqrt(c.variance));
    if (best_feasible_img_s_) {
      const auto f = objective.predict(coordinates_[i]);
      score += log_expected_improvement(f.mean, std::sqrt(f.variance), *best_feasible_img_s_);
    }
    // Strictly greater: ties go to the lowest index, so the choice is deterministic.
    if (!best_index || score > best_score) {
      best_index = i;
      best_score = score;
    }
  }
  return *best_index;
}

std::optional<ConfigPoint> BobdTuner::propose() {
  if (visited_count_ == space_.size()) return std::nullopt;
  if (observed_inputs_.size() < options_.initial_design) {
    if (const auto design = next_design_point()) return space_.point(*design);
  }
  return space_.point(most_promising_point());
}

void BobdTuner::tell(const ConfigPoint& point, const TrialResult& result) {
  const auto found = space_.index_of(point);
  if (!found) throw usage_error(fmt::format("bobd: {} is not in the search space", describe(point)));
  const auto index = *found;
  // A second measurement of one input would make the noiseless GP's kernel matrix singular.
  if (visited_[index]) throw usage_error(fmt::format("bobd: {} was already measured", describe(point)));
  visited_[index] = true;
  ++visited_count_;
  observed_inputs_.push_back(coordinates_[index]);
  observed_throughput_img_s_.push_back(result.throughput_img_s);
  observed_constraint_w_.push_back(cap_w_ - result.max_power_w);
  if (feasible(result, cap_w_) && (!best_feasible_img_s_ || result.throughput_img_s > *best_feasible_img_s_)) {
    best_feasible_img_s_ = result.throughput_img_s;
  }
}

}  // namespace gpucap::tune
