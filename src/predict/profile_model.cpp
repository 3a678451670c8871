#include "gpucap/predict/profile_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"

namespace gpucap::predict {

namespace {

void check_sample(const ProfileSample& s) {
  const auto bad = [&](const std::string& what) {
    return Error(ErrorCode::invalid_data,
                 fmt::format("profile: configuration batch={} sm={:g}MHz: {}", s.batch_size, s.sm_clock_mhz, what));
  };
  if (s.batch_size < 1) throw bad("batch size must be >= 1");
  if (!(s.sm_clock_mhz > 0.0) || (s.memory_clock_mhz && !(*s.memory_clock_mhz > 0.0))) {
    throw bad("clocks must be positive");
  }
  if (!std::isfinite(s.throughput_img_s) || s.throughput_img_s < 0.0 || !std::isfinite(s.max_power_w) ||
      s.max_power_w < 0.0) {
    throw bad("throughput and power must be finite and >= 0");
  }
}

// Sort key: default memory clock first, then by memory clock, SM clock and batch size.
auto key(const ProfileSample& s) {
  return std::make_tuple(s.memory_clock_mhz.has_value(), s.memory_clock_mhz.value_or(0.0), s.sm_clock_mhz,
                         s.batch_size);
}

bool same_column(const ProfileColumn& c, const ProfileSample& s) {
  return c.sm_clock_mhz == s.sm_clock_mhz && c.memory_clock_mhz == s.memory_clock_mhz;
}

}  // namespace

ProfileModel::ProfileModel(const std::vector<ProfileSample>& samples) {
  if (samples.empty()) throw Error(ErrorCode::invalid_data, "profile: no measurements");
  auto sorted = samples;
  for (const auto& s : sorted) check_sample(s);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return key(a) < key(b); });
  for (const auto& s : sorted) {
    if (columns_.empty() || !same_column(columns_.back(), s)) {
      columns_.push_back(ProfileColumn{s.sm_clock_mhz, s.memory_clock_mhz, {}, {}, {}});
    }
    auto& column = columns_.back();
    if (!column.batch_sizes.empty() && column.batch_sizes.back() == s.batch_size) {
      throw Error(ErrorCode::invalid_data, fmt::format("profile: configuration batch={} sm={:g}MHz appears twice",
                                                       s.batch_size, s.sm_clock_mhz));
    }
    column.batch_sizes.push_back(s.batch_size);
    column.throughput_img_s.push_back(s.throughput_img_s);
    column.max_power_w.push_back(s.max_power_w);
  }
}

bool ProfileModel::has_memory_clocks() const {
  return std::any_of(columns_.begin(), columns_.end(), [](const auto& c) { return c.memory_clock_mhz.has_value(); });
}

std::optional<ProfilePrediction> ProfileModel::predict(const ProfileColumn& column, int batch_size) const {
  if (batch_size < column.min_batch() || batch_size > column.max_batch()) return std::nullopt;
  const auto& b = column.batch_sizes;
  const auto upper = static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), batch_size) - b.begin());
  if (b[upper] == batch_size) return ProfilePrediction{column.throughput_img_s[upper], column.max_power_w[upper]};
  const auto lower = upper - 1;
  const double t = (std::log(batch_size) - std::log(b[lower])) / (std::log(b[upper]) - std::log(b[lower]));
  const auto lerp = [t](double a, double c) { return a + t * (c - a); };
  return ProfilePrediction{lerp(column.throughput_img_s[lower], column.throughput_img_s[upper]),
                           lerp(column.max_power_w[lower], column.max_power_w[upper])};
}

std::vector<ProfileSample> load_profile_json(const std::string& path) {
  const auto json = load_json_file(path);
  if (!json.is_object()) throw Error(ErrorCode::invalid_data, fmt::format("{}: a profile must be a JSON object", path));
  const JsonFields top(json, path);
  const auto& trials = top.at("trials");
  if (!trials.is_array() || trials.empty()) throw top.error("trials", "must be a non-empty array");
  std::vector<ProfileSample> samples;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    if (!trials[i].is_object()) throw top.error("trials", fmt::format("entry {} is not an object", i));
    const JsonFields f(trials[i], path, fmt::format("trials[{}].", i));
    ProfileSample s;
    const auto batch = f.positive_integer("batch_size");
    if (batch > 1'000'000) throw f.error("batch_size", "must be at most 1000000");
    s.batch_size = static_cast<int>(batch);
    s.sm_clock_mhz = f.positive("sm_clock_mhz");
    if (f.has("memory_clock_mhz") && !f.at("memory_clock_mhz").is_null()) s.memory_clock_mhz = f.positive("memory_clock_mhz");
    s.throughput_img_s = f.non_negative("throughput_img_s");
    s.max_power_w = f.non_negative("max_power_w");
    samples.push_back(s);
  }
  return samples;
}

}  // namespace gpucap::predict
