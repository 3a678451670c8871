#include "gpucap/predict/profile_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
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

namespace {

nlohmann::json load_profile_object(const std::string& path) {
  auto json = load_json_file(path);
  if (!json.is_object()) throw Error(ErrorCode::invalid_data, fmt::format("{}: a profile must be a JSON object", path));
  return json;
}

}  // namespace

std::vector<ProfileSample> load_profile_json(const std::string& path) {
  const auto json = load_profile_object(path);
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

namespace {

std::optional<std::string> optional_string(const JsonFields& f, std::string_view key) {
  if (!f.has(key) || f.at(key).is_null()) return std::nullopt;
  return f.string(key);
}

std::string file_stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// "cuda:1" and "cuda" run the same engine; only the kind of device changes what a batch costs.
std::string device_kind(const std::string& device) { return device.substr(0, device.find(':')); }

}  // namespace

ProfileOrigin load_profile_origin(const std::string& path) {
  const auto json = load_profile_object(path);
  const JsonFields top(json, path);
  ProfileOrigin o;
  if (top.has("simulated")) {
    if (!top.at("simulated").is_boolean()) throw top.error("simulated", "must be true or false");
    o.simulated = top.at("simulated").get<bool>();
  }
  o.gpu = optional_string(top, "gpu");
  // The twin's model is an id; a real GPU's is the file it loaded. Without "simulated" which of
  // the two it is is unknown, and it is not compared.
  if (const auto model = optional_string(top, "model"); model && o.simulated) o.model = *o.simulated ? *model : file_stem(*model);
  if (top.has("setup") && !top.at("setup").is_null()) {
    // Only a real GPU's measurements hold a setup (tune's and run's trial files, tune --json).
    if (!o.simulated) o.simulated = false;
    const auto setup = top.object("setup");
    if (!o.gpu) o.gpu = optional_string(setup, "gpu");
    if (const auto file = optional_string(setup, "model_file"); file && !o.model) o.model = file_stem(*file);
    o.precision = optional_string(setup, "precision");
    if (setup.has("input_size") && !setup.at("input_size").is_null()) o.input_size = setup.positive_integer("input_size");
    o.engine_device = optional_string(setup, "engine_device");
  }
  return o;
}

std::optional<std::string> profile_mismatch(const ProfileOrigin& measured, const ProfileOrigin& here) {
  const auto where = [](bool simulated) { return simulated ? std::string("the twin") : std::string("a real GPU"); };
  if (measured.simulated && here.simulated && *measured.simulated != *here.simulated) {
    return fmt::format("it was measured on {}, and this runs on {}", where(*measured.simulated), where(*here.simulated));
  }
  const auto differ = [](const auto& a, const auto& b) { return a && b && *a != *b; };
  if (differ(measured.gpu, here.gpu)) return fmt::format("it was measured on {}, and this GPU is {}", *measured.gpu, *here.gpu);
  if (differ(measured.model, here.model)) return fmt::format("it was measured with model {}, and this runs {}", *measured.model, *here.model);
  if (differ(measured.precision, here.precision)) {
    return fmt::format("it was measured with precision {}, and this runs {}", *measured.precision, *here.precision);
  }
  if (differ(measured.input_size, here.input_size)) {
    return fmt::format("it was measured with input size {}, and this runs {}", *measured.input_size, *here.input_size);
  }
  if (measured.engine_device && here.engine_device && device_kind(*measured.engine_device) != device_kind(*here.engine_device)) {
    return fmt::format("it was measured with the engine on {}, and this runs it on {}", *measured.engine_device, *here.engine_device);
  }
  return std::nullopt;
}

}  // namespace gpucap::predict
