// The serve matrix's reference points on the twin: the capacity under a cap and the oracle of a
// cap segment, both exhaustive searches over static settings (bench/serve_bench.hpp).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpucap/bench/serve_bench.hpp"
#include "gpucap/control/serving.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/runtime/sim_platform.hpp"
#include "gpucap/serve/arrivals.hpp"
#include "gpucap/sim/perf_model.hpp"

namespace gpucap::bench {

namespace {

constexpr double kAttainment = 0.99;      // the SLO is met by 99 % of the requests judged
constexpr double kStartRateRps = 8.0;     // the capacity search's first rate (any setting serves it)
constexpr double kFirstGrowth = 2.0;      // ... doubled until the first setting fails
constexpr double kGrowth = 1.25;          // a later setting's rate grows by this until it fails
constexpr double kHighestRateRps = 1e6;   // no setting of a GPU twin serves more
constexpr double kShedStep = 0.99;        // the shedding oracle lowers its admit rate by 1 % steps
constexpr int kShedTries = 20;
constexpr std::uint64_t kMaxArrivals = 100'000'000;
// The share of a setting's least power (least_power_w) no window's mean falls under: the sensor's
// noise is 1 % or less.
constexpr double kIdleFloorShare = 0.95;

// A static setting under serve: fixed batcher knobs, clock and admit rate; the power limit follows
// the cap (the board enforces it), as the static Triton-style setting's does.
class SettingServing final : public control::ServingController {
 public:
  SettingServing(StaticSetting setting, control::PlatformLimits limits)
      : setting_(std::move(setting)), limits_(std::move(limits)) {}
  [[nodiscard]] std::string_view name() const override { return "oracle"; }
  [[nodiscard]] control::DecisionPeriod period() const override { return control::DecisionPeriod::every_seconds(1.0); }
  [[nodiscard]] control::Requirements requirements() const override {
    return control::Requirements{setting_.sm_clock_mhz.has_value(), setting_.memory_clock_mhz.has_value(), true};
  }
  [[nodiscard]] control::ServingKnobs initial_knobs(double cap_w) const override {
    control::ServingKnobs knobs;
    knobs.max_batch_size = setting_.batch_cap;
    knobs.max_queue_delay_s = setting_.delay_s;
    knobs.sm_clock_mhz = setting_.sm_clock_mhz;
    knobs.memory_clock_mhz = setting_.memory_clock_mhz;
    knobs.power_limit_w = std::clamp(cap_w, limits_.power_limit_min_w, limits_.power_limit_max_w);
    knobs.admit_rate_rps = setting_.admit_rate_rps;
    return knobs;
  }
  [[nodiscard]] control::ServingKnobs decide(const control::ServingObservation& o) override {
    return initial_knobs(o.cap_w);
  }
  [[nodiscard]] std::string describe_state() const override { return setting_.describe(); }
  [[nodiscard]] bool reacts_to_cap_changes() const override { return true; }

 private:
  StaticSetting setting_;
  control::PlatformLimits limits_;
};

// Thrown from a window callback to stop a simulation whose outcome is settled.
struct Settled {};

serve::SimulationConfig simulation_config(const ServeTwin& twin, double cap_w, double duration_s) {
  serve::SimulationConfig config;
  config.duration_s = duration_s;
  config.drain_s = twin.drain_s;
  config.cap = CapSchedule::constant(cap_w);
  config.slo_s = twin.slo_s;
  config.batcher.max_batch_size = twin.model_max_batch_size;
  return config;
}

// Runs `setting` over `arrivals_s` under a constant cap; `on_window` may throw Settled to stop.
// Returns nullopt when stopped.
std::optional<serve::SimulationReport> simulate_setting(const ServeTwin& twin, const StaticSetting& setting,
                                                        double cap_w, double duration_s, std::vector<double> arrivals_s,
                                                        std::uint64_t twin_seed,
                                                        const std::function<void(const serve::ServingWindow&)>& on_window) {
  runtime::SimOptions options;
  options.seed = twin_seed;
  options.sample_hz = twin.sample_hz;
  runtime::SimPlatform platform(*twin.gpu, *twin.model, twin.precision, options);
  SettingServing controller(setting, platform.controller_limits());
  auto arrivals = serve::ArrivalProcess::from_trace(std::move(arrivals_s), duration_s, kMaxArrivals);
  try {
    return serve::simulate_serving(platform, controller, std::move(arrivals), simulation_config(twin, cap_w, duration_s),
                                   on_window);
  } catch (const Settled&) {
    return std::nullopt;
  }
}

// Requests that cannot count as good: late, failed, shed or refused.
std::uint64_t misses(const serve::WindowCounts& counts) {
  return counts.answered - counts.good + counts.failed + counts.shed + counts.refused;
}

bool meets(const serve::SegmentReport& total) {
  return total.slo_attainment >= kAttainment && total.windows_over_cap_outside_transitions == 0;
}

// The least a window of `setting` draws on average: the GPU idle with the model loaded at the
// clocks the setting asks for (the twin idles there; its governor holds the boost clock), or, if
// that is above the cap, the power limit at which a busy GPU is held (less a little for the
// sensor's noise and the limiter's clock steps).
double least_power_w(const sim::GpuSpec& gpu, const StaticSetting& setting, double cap_w) {
  const sim::OperatingPoint point{setting.sm_clock_mhz.value_or(gpu.boost_clock_mhz),
                                  setting.memory_clock_mhz.value_or(gpu.default_memory_clock_mhz)};
  return kIdleFloorShare * std::min(sim::idle_loaded_power_w(gpu, point), cap_w);
}

double window_energy_j(const serve::ServingWindow& w) {
  return w.power.empty() ? 0.0 : w.power.mean_w * (w.end_s - w.start_s);
}

// One Poisson stream at every rate: a unit-rate process drawn once, its times divided by the rate
// (a Poisson process at rate r is the unit-rate one with time scaled by 1/r), so the capacity
// search's many rates cost one draw and every rate sees the same randomness.
class ScaledArrivals {
 public:
  ScaledArrivals(std::uint64_t seed, double duration_s)
      : unit_(serve::ArrivalProcess::from_schedule(serve::RateSchedule::constant(1.0), serve::ArrivalSpacing::poisson, seed,
                                                   kHighestRateRps * duration_s, kMaxArrivals)),
        duration_s_(duration_s) {}

  // The arrival times at `rate_rps` in [0, duration).
  std::vector<double> at(double rate_rps) {
    const double unit_end = rate_rps * duration_s_;
    while (!ended_ && (times_.empty() || times_.back() < unit_end)) {
      const auto t = unit_.next();
      if (!t) {
        ended_ = true;
        break;
      }
      times_.push_back(*t);
    }
    std::vector<double> out;
    for (const double t : times_) {
      if (t >= unit_end) break;
      out.push_back(t / rate_rps);
    }
    return out;
  }

 private:
  serve::ArrivalProcess unit_;
  double duration_s_;
  std::vector<double> times_;
  bool ended_ = false;
};

// Whether `setting` serves `arrivals_s` under the cap: SLO attainment >= 99 %, no window over the
// cap. Stops at the first window over the cap or once the misses exceed 1 %.
bool holds(const ServeTwin& twin, const StaticSetting& setting, const CapacitySearch& search,
           std::vector<double> arrivals_s) {
  const auto budget = static_cast<std::uint64_t>(std::floor((1.0 - kAttainment) * static_cast<double>(arrivals_s.size())));
  std::uint64_t missed = 0;
  const auto report = simulate_setting(twin, setting, search.cap_w, search.duration_s, std::move(arrivals_s),
                                       search.twin_seed, [&](const serve::ServingWindow& w) {
                                         if (w.over_cap && !w.cap_transition) throw Settled{};
                                         missed += misses(w.counts);
                                         if (missed > budget) throw Settled{};
                                       });
  return report && meets(report->total);
}

}  // namespace

std::string StaticSetting::describe() const {
  auto text = fmt::format("batch<={} delay={:g}ms sm={}", batch_cap, delay_s * 1e3,
                          sm_clock_mhz ? fmt::format("{:g}MHz", *sm_clock_mhz) : std::string("GPU's own"));
  if (memory_clock_mhz) text += fmt::format(" mem={:g}MHz", *memory_clock_mhz);
  if (!std::isinf(admit_rate_rps)) text += fmt::format(" admit={:.0f}/s", admit_rate_rps);
  return text;
}

std::vector<StaticSetting> oracle_settings(const ServeOracleSpace& space, const sim::GpuSpec& gpu) {
  // The GPU's own clock first, then the ladder from the top: the fastest settings come first, so
  // the capacity search raises its bar early and most later settings fail at once.
  std::vector<std::optional<double>> clocks;
  if (space.gpu_clock) clocks.emplace_back(std::nullopt);
  for (auto it = gpu.dvfs_levels_mhz.rbegin(); it != gpu.dvfs_levels_mhz.rend(); ++it) clocks.emplace_back(*it);
  // The memory clocks from the top (the default first where it is the highest); one, the
  // driver's default, where the GPU has a single one or the space leaves them out.
  std::vector<std::optional<double>> memory;
  if (space.memory_clocks && gpu.memory_clocks_mhz.size() > 1) {
    for (auto it = gpu.memory_clocks_mhz.rbegin(); it != gpu.memory_clocks_mhz.rend(); ++it) memory.emplace_back(*it);
  } else {
    memory.emplace_back(std::nullopt);
  }
  auto batches = space.batch_sizes;
  std::sort(batches.rbegin(), batches.rend());
  auto delays = space.delays_s;
  std::sort(delays.begin(), delays.end());
  std::vector<StaticSetting> settings;
  for (const auto& clock : clocks) {
    for (const auto& memory_clock : memory) {
      for (const int batch : batches) {
        for (const double delay : delays) settings.push_back(StaticSetting{batch, delay, clock, memory_clock, kAdmitAll});
      }
    }
  }
  return settings;
}

ServeCapacity find_capacity(const ServeTwin& twin, const std::vector<StaticSetting>& settings,
                            const CapacitySearch& search) {
  ServeCapacity out;
  out.cap_w = search.cap_w;
  out.settings = static_cast<int>(settings.size());
  ScaledArrivals arrivals(search.arrival_seed, search.duration_s);
  const auto holds_at = [&](const StaticSetting& s, double rate_rps) {
    ++out.simulations;
    return holds(twin, s, search, arrivals.at(rate_rps));
  };
  double best_rps = 0.0;
  for (const auto& setting : settings) {
    const double first = best_rps > 0.0 ? best_rps * (1.0 + search.resolution) : kStartRateRps;
    if (!holds_at(setting, first)) continue;
    const double growth = best_rps > 0.0 ? kGrowth : kFirstGrowth;
    double low = first;
    double high = 0.0;
    while (high == 0.0) {
      const double up = low * growth;
      if (up > kHighestRateRps) throw Error(ErrorCode::internal, "serve capacity search: no rate fails");
      if (holds_at(setting, up)) {
        low = up;
      } else {
        high = up;
      }
    }
    while (high / low > 1.0 + search.resolution) {
      const double mid = std::sqrt(low * high);
      (holds_at(setting, mid) ? low : high) = mid;
    }
    best_rps = low;
    out.setting = setting;
  }
  out.capacity_rps = best_rps;
  return out;
}

ServeOracleSegment search_oracle_segment(const ServeTwin& twin, const std::vector<StaticSetting>& settings,
                                         const OracleSearch& search) {
  ServeOracleSegment out;
  out.settings = static_cast<int>(settings.size());
  const auto arrivals = static_cast<std::uint64_t>(search.arrivals_s.size());
  const auto budget = static_cast<std::uint64_t>(std::floor((1.0 - kAttainment) * static_cast<double>(arrivals)));
  struct Best {
    std::uint64_t good = 0;
    double energy_j = 0.0;
    StaticSetting setting;
    serve::SimulationReport report;
  };
  std::optional<Best> best;
  // From the slowest settings up: at a load most settings carry, the least energy is found early
  // and the faster settings stop once they have drawn more.
  for (auto it = settings.rbegin(); it != settings.rend(); ++it) {
    const auto& setting = *it;
    const double floor_w = least_power_w(*twin.gpu, setting, search.cap_w);
    std::uint64_t missed = 0;
    double energy_j = 0.0;
    const auto report = simulate_setting(
        twin, setting, search.cap_w, search.duration_s, search.arrivals_s, search.twin_seed,
        [&](const serve::ServingWindow& w) {
          if (w.over_cap && !w.cap_transition) throw Settled{};
          missed += misses(w.counts);
          if (missed > budget) throw Settled{};
          energy_j += window_energy_j(w);
          if (best) {
            // The most it can still get within the SLO, and the least energy it will have drawn,
            // against what the best has.
            const auto possible = arrivals - std::min(missed, arrivals);
            const double least_energy_j = energy_j + floor_w * std::max(0.0, search.duration_s - w.end_s);
            if (possible < best->good || (possible == best->good && least_energy_j > best->energy_j)) throw Settled{};
          }
        });
    if (!report) {
      ++out.stopped_early;
      continue;
    }
    if (!meets(report->total)) continue;
    double total_energy_j = 0.0;
    for (const auto& w : report->windows) total_energy_j += window_energy_j(w);
    const auto good = report->total.good;
    if (!best || good > best->good || (good == best->good && total_energy_j < best->energy_j)) {
      best = Best{good, total_energy_j, setting, *report};
    }
  }
  if (!best && search.capacity != nullptr && search.capacity->capacity_rps > 0.0) {
    // Nothing carries the whole load: shed down to what the capacity's setting serves.
    auto setting = search.capacity->setting;
    setting.admit_rate_rps = search.capacity->capacity_rps;
    for (int i = 0; i < kShedTries && !best; ++i, setting.admit_rate_rps *= kShedStep) {
      const auto report = simulate_setting(twin, setting, search.cap_w, search.duration_s, search.arrivals_s,
                                           search.twin_seed, {});
      if (report && meets(report->total)) {
        best = Best{report->total.good, 0.0, setting, *report};
        out.sheds = true;
      }
    }
  }
  if (best) {
    out.setting = best->setting;
    const auto run = serve_run_figures("oracle", best->report);
    out.figures = run.total;
    out.figures.cap_w = search.cap_w;
    out.windows = run.windows;
  }
  return out;
}

}  // namespace gpucap::bench
