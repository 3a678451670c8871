#include "gpucap/runtime/platform_tuning.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "gpucap/control/fixed.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/runtime/runner.hpp"
#include "gpucap/runtime/tuning.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::runtime {

PlatformTrialRunner::PlatformTrialRunner(Platform& platform, PlatformTrialOptions options)
    : platform_(platform), options_(options) {
  if (!(options.warmup_s >= 0.0 && options.warmup_s <= 600.0)) {
    throw usage_error(fmt::format("a trial's warm-up of {:g} s must be between 0 and 600 s", options.warmup_s));
  }
  if (!(options.measure_s >= 0.1 && options.measure_s <= 3600.0)) {
    throw usage_error(fmt::format("a trial's measurement of {:g} s must be between 0.1 and 3600 s", options.measure_s));
  }
}

namespace {

// The windows a trial measures: those that start after the warm-up; if a batch outlasted the
// warm-up and the measurement together, the last window.
std::vector<TraceRow> measured_windows(const std::vector<TraceRow>& rows, double warmup_s) {
  std::vector<TraceRow> measured;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(measured),
               [warmup_s](const TraceRow& r) { return r.window_start_s >= warmup_s - 1e-9; });
  if (measured.empty() && !rows.empty()) measured.push_back(rows.back());
  return measured;
}

}  // namespace

PlatformTrial PlatformTrialRunner::measure(const tune::ConfigPoint& point) {
  const Knobs knobs = options_.lock_clocks ? knobs_for(point) : single_tenant_knobs(point.batch_size);
  control::FixedController controller(knobs, control::DecisionPeriod::every_seconds(kTrialWindowS));
  RunConfig config;
  config.duration_s = options_.warmup_s + options_.measure_s;
  // No cap applies to a measurement: the search judges feasibility from its highest sample.
  config.schedule = CapSchedule::constant(std::max(1.0, platform_.controller_limits().power_limit_max_w));
  config.stop = options_.stop;
  std::vector<TraceRow> rows;
  const double started_s = platform_.clock().now_s();
  const auto summary = run_job(platform_, controller, config, [&rows](const TraceRow& row) { rows.push_back(row); });
  if (summary.stopped) throw Error(ErrorCode::interrupted, fmt::format("stopped while measuring {}", describe(point)));
  const auto measured = measured_windows(rows, options_.warmup_s);
  if (measured.empty()) {
    throw Error(ErrorCode::device, fmt::format("{}: no power reading during the measurement", describe(point)));
  }
  PlatformTrial trial;
  long long images = 0;
  double seconds = 0.0;
  double energy_j = 0.0;
  for (const auto& w : measured) {
    const double length_s = w.time_s - w.window_start_s;
    images += w.images;
    seconds += length_s;
    energy_j += w.window_mean_w * length_s;
    trial.result.max_power_w = std::max(trial.result.max_power_w, w.window_max_w);
    trial.sm_clock_mhz += w.sm_clock_mhz / static_cast<double>(measured.size());
    trial.memory_clock_mhz += w.memory_clock_mhz / static_cast<double>(measured.size());
  }
  trial.result.throughput_img_s = seconds > 0.0 ? static_cast<double>(images) / seconds : 0.0;
  trial.result.mean_power_w = seconds > 0.0 ? energy_j / seconds : measured.back().window_mean_w;
  trial.result.cost_s = platform_.clock().now_s() - started_s;
  return trial;
}

namespace {

nlohmann::json trial_record(const tune::ConfigPoint& point, const PlatformTrial& trial) {
  return {{"batch_size", point.batch_size},
          {"sm_clock_mhz", point.sm_clock_mhz},
          {"memory_clock_mhz", point.memory_clock_mhz ? nlohmann::json(*point.memory_clock_mhz) : nlohmann::json()},
          {"throughput_img_s", trial.result.throughput_img_s},
          {"max_power_w", trial.result.max_power_w},
          {"mean_power_w", trial.result.mean_power_w},
          {"cost_s", trial.result.cost_s},
          {"measured_sm_clock_mhz", trial.sm_clock_mhz},
          {"measured_memory_clock_mhz", trial.memory_clock_mhz}};
}

std::pair<tune::ConfigPoint, PlatformTrial> parse_record(const JsonFields& f) {
  tune::ConfigPoint point;
  const auto batch = f.positive_integer("batch_size");
  if (batch > 1'000'000) throw f.error("batch_size", "must be at most 1000000");
  point.batch_size = static_cast<int>(batch);
  point.sm_clock_mhz = f.positive("sm_clock_mhz");
  if (f.has("memory_clock_mhz") && !f.at("memory_clock_mhz").is_null()) point.memory_clock_mhz = f.positive("memory_clock_mhz");
  PlatformTrial trial;
  trial.result.throughput_img_s = f.non_negative("throughput_img_s");
  trial.result.max_power_w = f.non_negative("max_power_w");
  trial.result.mean_power_w = f.non_negative("mean_power_w");
  trial.result.cost_s = f.non_negative("cost_s");
  trial.sm_clock_mhz = f.non_negative("measured_sm_clock_mhz");
  trial.memory_clock_mhz = f.non_negative("measured_memory_clock_mhz");
  return {point, trial};
}

}  // namespace

TrialFileContents read_trial_file(const std::string& path) {
  const auto json = load_json_file(path);
  if (!json.is_object()) throw Error(ErrorCode::invalid_data, fmt::format("{}: a trial file must be a JSON object", path));
  const JsonFields top(json, path);
  TrialFileContents contents;
  if (top.has("setup")) contents.setup = top.at("setup");
  const auto& trials = top.at("trials");
  if (!trials.is_array()) throw top.error("trials", "must be an array");
  for (std::size_t i = 0; i < trials.size(); ++i) {
    if (!trials[i].is_object()) throw top.error("trials", fmt::format("entry {} is not an object", i));
    contents.trials.push_back(parse_record(JsonFields(trials[i], path, fmt::format("trials[{}].", i))));
  }
  return contents;
}

TrialFile::TrialFile(std::string path, nlohmann::json setup) : path_(std::move(path)), setup_(std::move(setup)) {
  if (!std::filesystem::exists(path_)) return;
  auto contents = read_trial_file(path_);
  if (contents.setup != setup_) {
    throw usage_error(fmt::format("{} holds the trials of another search (setup {}, this one {}): use another file",
                                  path_, contents.setup.is_null() ? std::string("missing") : contents.setup.dump(),
                                  setup_.dump()));
  }
  trials_ = std::move(contents.trials);
}

std::optional<PlatformTrial> TrialFile::find(const tune::ConfigPoint& point) const {
  for (const auto& [p, trial] : trials_) {
    const bool same_memory = p.memory_clock_mhz.has_value() == point.memory_clock_mhz.has_value() &&
                             (!p.memory_clock_mhz || std::abs(*p.memory_clock_mhz - *point.memory_clock_mhz) < 1e-6);
    if (p.batch_size == point.batch_size && std::abs(p.sm_clock_mhz - point.sm_clock_mhz) < 1e-6 && same_memory) return trial;
  }
  return std::nullopt;
}

void TrialFile::add(const tune::ConfigPoint& point, const PlatformTrial& trial) {
  trials_.emplace_back(point, trial);
  nlohmann::json records = nlohmann::json::array();
  for (const auto& [p, t] : trials_) records.push_back(trial_record(p, t));
  write_text_file_durably(path_, nlohmann::json{{"setup", setup_}, {"trials", records}}.dump(2) + "\n");
}

MeasureFn cached_measure(PlatformTrialRunner& runner, TrialFile* file, TrialListener on_trial) {
  // Without a file, this process's own trials still answer a second ask (bobd's searches of
  // several caps start from the same points).
  auto measured = std::make_shared<std::vector<std::pair<tune::ConfigPoint, tune::TrialResult>>>();
  return [&runner, file, measured, on_trial = std::move(on_trial)](const tune::ConfigPoint& point) {
    std::optional<tune::TrialResult> known;
    if (file != nullptr) {
      if (const auto kept = file->find(point)) known = kept->result;
    }
    for (const auto& [p, result] : *measured) {
      if (!known && p == point) known = result;
    }
    if (known) {
      if (on_trial) on_trial(point, *known, false);
      return *known;
    }
    const auto trial = runner.measure(point);
    if (file != nullptr) file->add(point, trial);
    measured->emplace_back(point, trial.result);
    if (on_trial) on_trial(point, trial.result, true);
    return trial.result;
  };
}

tune::SearchSpace real_profile_space(const control::PlatformLimits& limits, bool lock_clocks,
                                     const std::optional<std::vector<int>>& batch_sizes) {
  constexpr std::size_t kProfileClockLevels = 5;
  tune::SearchSpace space;
  space.batch_sizes = batch_sizes.value_or(std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256});
  auto clocks = limits.supported_sm_clocks_mhz.empty() ? limits.dvfs_levels_mhz : limits.supported_sm_clocks_mhz;
  std::sort(clocks.begin(), clocks.end());
  if (clocks.empty()) throw Error(ErrorCode::unsupported, "the GPU reports no SM clocks to profile at");
  space.sm_clocks_mhz = lock_clocks ? sim::spread_levels(clocks, kProfileClockLevels) : std::vector<double>{clocks.back()};
  space.validate();
  return space;
}

}  // namespace gpucap::runtime
