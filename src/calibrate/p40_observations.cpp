#include "gpucap/calibrate/p40_observations.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "gpucap/sim/perf_model.hpp"
#include "gpucap/sim/spawned_sampler.hpp"

namespace gpucap::calibrate {

namespace {

sim::OperatingPoint p40_point(const sim::GpuSpec& gpu, double clock_mhz) {
  return {sim::nearest_clock_mhz(gpu.sm_clocks_mhz, clock_mhz), kP40MemoryClockMhz};
}

sim::BatchProfile p40_profile(const TwinParams& params, const std::string& model, int batch, double clock_mhz) {
  const auto& gpu = params.gpus.at(kP40);
  const auto& spec = params.models.at(model);
  return sim::profile_batch(gpu, spec, spec.precision, batch, p40_point(gpu, clock_mhz));
}

// A group's weight grows with the steps behind it (a median of 30 steps is worth more than one of
// 3), saturating at 30.
double weight_of(std::size_t steps) { return std::sqrt(static_cast<double>(std::min<std::size_t>(steps, 30)) / 30.0); }

struct GroupKey {
  int batch;
  double clock_mhz;
  bool operator<(const GroupKey& o) const { return batch != o.batch ? batch < o.batch : clock_mhz < o.clock_mhz; }
};

struct Group {
  std::vector<std::size_t> rows;
};

struct FirstStep {  // a run's first step at a new batch size
  int batch;
  double clock_mhz;
  double extra_s;   // how much longer it took than the steady steps of its group
};

// Median power of 0-% samples per reported clock, over all runs: the reference that tells a caught
// compute phase from an idle window.
std::map<double, double> measured_idle_by_clock(const std::vector<P40Run>& runs) {
  std::map<double, std::vector<double>> by_clock;
  for (const auto& run : runs) {
    for (const auto& s : run.smi) {
      if (s.gpu_util_pct == 0.0 && s.mem_util_pct == 0.0 && s.power_w > 25.0) by_clock[s.sm_clock_mhz].push_back(s.power_w);
    }
  }
  std::map<double, double> idle;
  for (auto& [clock, values] : by_clock) {
    if (values.size() >= 3) idle[clock] = median(values);
  }
  return idle;
}

double idle_reference(const std::map<double, double>& idle, double clock_mhz) {
  if (idle.empty()) return 50.0;
  const auto above = idle.lower_bound(clock_mhz);
  if (above == idle.end()) return std::prev(above)->second;
  if (above == idle.begin() || above->first == clock_mhz) return above->second;
  const auto below = std::prev(above);
  return (clock_mhz - below->first) < (above->first - clock_mhz) ? below->second : above->second;
}

// The harness's nvidia-smi sampler in one group's timed steps (sim/spawned_sampler.hpp). Steps
// shorter than the spacing of its processes split into a fast mode and a slow one a stall longer.
struct StallEvidence {
  double stall_s = 0.0;  // slow mode − fast mode
  double rate_hz = 0.0;  // stalls per second of stepping: the time beyond the fast mode, in stalls
};

constexpr std::size_t kMinStallSteps = 200;
constexpr double kSlowAboveS = 0.03;   // a step this much over the fast mode's floor was stalled
constexpr double kSlowWithinS = 0.12;  // ... and one this far over it was stalled more than once
constexpr double kMaxFastStepS = 0.12;  // longer steps catch two stalls too often to tell them apart

std::optional<StallEvidence> stall_evidence(std::vector<double> steps_s) {
  if (steps_s.size() < kMinStallSteps) return std::nullopt;
  std::sort(steps_s.begin(), steps_s.end());
  const double floor_s = steps_s[steps_s.size() / 10];
  std::vector<double> fast, slow;
  double total_s = 0.0;
  for (const double s : steps_s) {
    total_s += s;
    if (s < floor_s + kSlowAboveS) fast.push_back(s);
    else if (s < floor_s + kSlowWithinS) slow.push_back(s);
  }
  if (slow.size() * 10 < steps_s.size()) return std::nullopt;  // no second mode
  const double fast_s = median(fast);
  if (fast_s > kMaxFastStepS) return std::nullopt;
  StallEvidence evidence;
  evidence.stall_s = median(slow) - fast_s;
  double beyond_fast_s = 0.0;
  for (const double s : steps_s) beyond_fast_s += s - fast_s;
  evidence.rate_hz = beyond_fast_s / evidence.stall_s / total_s;
  return evidence;
}

// The CPU's part of a step: decoding the batch's JPEGs.
double decode_s(const TwinParams& params, const std::string& model, const std::string& dataset, int batch) {
  const auto& data = params.datasets.at(dataset);
  return data.host_s_per_batch + sim::host_seconds_per_image(data, params.models.at(model)) * batch;
}

// Appends the GPU utilisation (0-1) of the nvidia-smi samples the run logged during step `row`.
void append_step_utilisation(const P40Run& run, std::size_t row, std::vector<double>& out) {
  const double from = run.log.rows[row - 1].time_s;
  const double to = run.log.rows[row].time_s;
  const auto first = std::lower_bound(run.smi.begin(), run.smi.end(), from,
                                      [](const bench::SmiSample& s, double t) { return s.time_s < t; });
  for (auto it = first; it != run.smi.end() && it->time_s <= to; ++it) out.push_back(it->gpu_util_pct / 100.0);
}

}  // namespace

sim::SpawnedSampler p40_sampler(const TwinParams& params) {
  const auto& host = params.gpus.at(kP40).host;
  return sim::SpawnedSampler{host.nvidia_smi_process_s, host.nvidia_smi_stall_s};
}

double p40_idle_power_w(const TwinParams& params, double clock_mhz) {
  const auto& gpu = params.gpus.at(kP40);
  return sim::idle_loaded_power_w(gpu, p40_point(gpu, clock_mhz));
}

double p40_busy_power_w(const TwinParams& params, const std::string& model, int batch, double clock_mhz) {
  const auto& gpu = params.gpus.at(kP40);
  const auto profile = p40_profile(params, model, batch, clock_mhz);
  return sim::busy_power_w(gpu, p40_point(gpu, clock_mhz), profile.sm_activity, profile.memory_activity);
}

double p40_caught_power_w(const TwinParams& params, const std::string& model, int batch, double clock_mhz) {
  const auto& gpu = params.gpus.at(kP40);
  const auto point = p40_point(gpu, clock_mhz);
  const auto profile = p40_profile(params, model, batch, clock_mhz);
  return sim::peak_reading_w(profile, sim::busy_halves_w(gpu, point, profile), sim::idle_loaded_power_w(gpu, point),
                             gpu.sensor.averaging_window_s);
}

double p40_busy_s(const TwinParams& params, const std::string& model, int batch, double clock_mhz) {
  return p40_profile(params, model, batch, clock_mhz).busy_s;
}

double p40_autotune_s(const TwinParams& params, const std::string& model, int batch, double clock_mhz) {
  return sim::autotune_s(params.gpus.at(kP40), p40_profile(params, model, batch, clock_mhz));
}

P40StepPhases p40_step_phases(const TwinParams& params, const std::string& model, int batch, double clock_mhz,
                              bool new_batch_size) {
  const auto& gpu = params.gpus.at(kP40);
  const auto point = p40_point(gpu, clock_mhz);
  const auto profile = p40_profile(params, model, batch, clock_mhz);
  P40StepPhases phases;
  phases.idle_w = sim::idle_loaded_power_w(gpu, point);
  phases.halves = sim::busy_halves_w(gpu, point, profile);
  phases.compute_s = profile.busy_s;
  phases.autotune_s = new_batch_size ? sim::autotune_s(gpu, profile) : 0.0;
  return phases;
}

namespace {

// A logged step's time split by what the sampler's stalls do to it: the decode, the input
// preparation and the share of the busy phase that the kernel launches pace feel each stall
// whole; the rest of the busy phase rides through (as the twin's steps have it,
// sim::launch_stall_share).
struct StepExposure {
  double stallable_s = 0.0;
  double riding_s = 0.0;
};

StepExposure p40_step_exposure(const TwinParams& params, const std::string& model, const std::string& dataset,
                               int batch, double clock_mhz) {
  const auto sampler = p40_sampler(params);
  const auto profile = p40_profile(params, model, batch, clock_mhz);
  const double share = sim::sampler_stall_share(params.gpus.at(kP40), profile, sampler);
  return {decode_s(params, model, dataset, batch) + profile.prep_s + share * profile.busy_s,
          (1.0 - share) * profile.busy_s};
}

}  // namespace

double p40_step_s(const TwinParams& params, const std::string& model, const std::string& dataset, int batch,
                  double clock_mhz) {
  const auto exposure = p40_step_exposure(params, model, dataset, batch, clock_mhz);
  return p40_sampler(params).median_step_s(exposure.stallable_s) + exposure.riding_s;
}

double p40_felt_stall_s(const TwinParams& params, const std::string& model, const std::string& dataset, int batch,
                        double clock_mhz) {
  const auto exposure = p40_step_exposure(params, model, dataset, batch, clock_mhz);
  const double step_s = exposure.stallable_s + exposure.riding_s;
  return p40_sampler(params).stall_s * (step_s > 0.0 ? exposure.stallable_s / step_s : 1.0);
}

double p40_caught_chance(double visible_s, double step_s, double window_s, double period_s) {
  const double per_try = std::min(1.0, visible_s / std::max(1e-6, std::min(period_s, step_s)));
  const double tries = std::max(1.0, window_s / std::max(period_s, step_s));
  return 1.0 - std::pow(1.0 - per_try, tries);
}

namespace {

// A run-level share needs this many samples or windows behind it.
constexpr std::size_t kMinRunSamples = 20;

// Per run: the share of its steady steps' time the GPU was busy, from the mean utilisation
// nvidia-smi reported over them. One 1-Hz sample sees a compute phase of a tenth of a second or
// not at all, so the per-group busy times scatter by a factor of ten on the light models; the run's
// mean over hundreds of samples is what pins their compute phase down.
std::optional<Observation> busy_fraction_observation(const P40Run& run, const std::string& group, double weight) {
  struct Span {
    int batch = 0;
    double clock_mhz = 0.0;
    double seconds = 0.0;
    int steps = 0;
  };
  const auto& rows = run.log.rows;
  std::map<GroupKey, Span> spans;
  std::vector<double> util;
  for (std::size_t i = 1; i + 1 < rows.size(); ++i) {
    if (run.new_batch_size[i]) continue;
    auto& span = spans[{rows[i].batch_size, run.clock_mhz[i]}];
    span.batch = rows[i].batch_size;
    span.clock_mhz = run.clock_mhz[i];
    span.seconds += run.step_s(i);
    ++span.steps;
    append_step_utilisation(run, i, util);
  }
  double util_sum = 0.0;
  for (const double u : util) util_sum += u;
  if (util.size() < kMinRunSamples || !(util_sum > 0.0)) return std::nullopt;
  std::vector<Span> list;
  for (const auto& [key, span] : spans) list.push_back(span);
  return Observation{"p40", "busy_fraction", fmt::format("{} busy fraction", run.name), group,
                     util_sum / static_cast<double>(util.size()), weight, [model = run.model, list](const TwinParams& p) {
                       double busy_s = 0.0, total_s = 0.0;
                       for (const auto& span : list) {
                         busy_s += std::min(span.seconds, span.steps * p40_busy_s(p, model, span.batch, span.clock_mhz));
                         total_s += span.seconds;
                       }
                       return busy_s / total_s;
                     }};
}

// Per run: the share of its logged window maxima that caught a compute phase, against the twin's
// chance of catching one with its compute phases, its sampler period and the sensor's hold.
std::optional<Observation> caught_fraction_observation(const P40Run& run, const std::string& group,
                                                       const std::map<double, double>& idle, double margin_w,
                                                       double weight) {
  // Windows alike to 5 % in step and window length share one entry (the 78,330 windows of the
  // shared logs make about 18,900): the fit evaluates this for every parameter it moves.
  struct Kind {
    int batch = 0;
    double clock_mhz = 0.0;
    long step_bin = 0;
    long window_bin = 0;
    bool operator<(const Kind& o) const {
      return std::tie(batch, clock_mhz, step_bin, window_bin) < std::tie(o.batch, o.clock_mhz, o.step_bin, o.window_bin);
    }
  };
  struct Windows {
    int batch = 0;
    double clock_mhz = 0.0;
    double window_s = 0.0;  // mean over the windows of this kind
    double step_s = 0.0;
    double count = 0.0;
  };
  const auto bin = [](double seconds) { return std::lround(20.0 * std::log(std::max(seconds, 1e-3))); };
  const auto& rows = run.log.rows;
  std::map<Kind, Windows> kinds;
  double caught = 0.0, total = 0.0;
  std::size_t window_start = 0;  // the row after which the current window opened
  for (std::size_t i = 1; i + 1 < rows.size(); ++i) {
    if (run.window_closed[i - 1]) window_start = i - 1;
    const double f = run.clock_mhz[i];
    if (rows[i].power_w > idle_reference(idle, f) + margin_w) caught += 1.0;
    total += 1.0;
    const double window_s = rows[i].time_s - rows[window_start].time_s;
    const double step_s = run.step_s(i);
    auto& k = kinds[{rows[i].batch_size, f, bin(step_s), bin(window_s)}];
    k.batch = rows[i].batch_size;
    k.clock_mhz = f;
    k.window_s += window_s;
    k.step_s += step_s;
    k.count += 1.0;
  }
  if (total < static_cast<double>(kMinRunSamples) || !(caught > 0.0)) return std::nullopt;
  std::vector<Windows> list;
  for (auto& [kind, w] : kinds) {
    w.window_s /= w.count;
    w.step_s /= w.count;
    list.push_back(w);
  }
  return Observation{"p40", "caught_fraction", fmt::format("{} caught fraction", run.name), group, caught / total,
                     weight, [model = run.model, list, total](const TwinParams& p) {
                       const double period_s = p40_sampler(p).period_s();
                       const double hold_s = p.gpus.at(kP40).sensor.hold_s;
                       std::map<std::pair<int, double>, double> busy_s;  // per (batch, clock)
                       double sum = 0.0;
                       for (const auto& w : list) {
                         const auto key = std::make_pair(w.batch, w.clock_mhz);
                         auto it = busy_s.find(key);
                         if (it == busy_s.end()) it = busy_s.emplace(key, p40_busy_s(p, model, w.batch, w.clock_mhz)).first;
                         sum += w.count * p40_caught_chance(it->second + hold_s, w.step_s, w.window_s, period_s);
                       }
                       return sum / total;
                     }};
}

}  // namespace

std::vector<Observation> p40_observations(const std::vector<P40Run>& runs, const P40ObservationOptions& options) {
  std::vector<Observation> observations;
  const auto idle = measured_idle_by_clock(runs);
  for (const auto& run : runs) {
    const auto group = fmt::format("job {}", run.job);
    const auto& rows = run.log.rows;
    if (rows.size() < 3) continue;
    const double start_s = rows.front().time_s;
    const double end_s = rows.back().time_s;

    // Idle with the model loaded, per clock nvidia-smi reported during the run.
    std::map<double, std::vector<double>> idle_samples;
    for (const auto& s : run.smi) {
      if (s.time_s < start_s || s.time_s > end_s) continue;
      if (s.gpu_util_pct == 0.0 && s.mem_util_pct == 0.0 && s.power_w > 25.0) {
        idle_samples[s.sm_clock_mhz].push_back(s.power_w);
      }
    }
    for (const auto& [clock, values] : idle_samples) {
      if (values.size() < options.min_smi_samples) continue;
      const double f = clock;
      observations.push_back(Observation{"p40", "idle_power_w", fmt::format("{} idle at {:g} MHz", run.name, f), group,
                                         median(values), weight_of(values.size()),
                                         [f](const TwinParams& p) { return p40_idle_power_w(p, f); }});
    }

    // Steps grouped by (batch, clock); the first step (graph loading) and the last (a truncated
    // batch) are left out.
    std::map<GroupKey, Group> groups;
    for (std::size_t i = 1; i + 1 < rows.size(); ++i) groups[{rows[i].batch_size, run.clock_mhz[i]}].rows.push_back(i);
    std::vector<FirstStep> first_steps;
    for (const auto& [key, g] : groups) {
      if (g.rows.size() < options.min_rows) continue;
      const int b = key.batch;
      const double f = key.clock_mhz;
      const std::string model = run.model;
      const std::string dataset = run.dataset;
      const auto label = fmt::format("{} batch {} at {:g} MHz", run.name, b, f);

      std::vector<double> caught, throughput, step, timed_s;
      std::vector<std::size_t> steady;  // rows without autotuning
      const double caught_above = idle_reference(idle, f) + options.caught_margin_w;
      for (const auto i : g.rows) {
        // The first row after a window closed may hold samples of the previous batch (upstream's
        // sampler appended them late); only later rows measure this group's compute phase.
        const bool fresh_window = run.window_closed[i - 1];
        if (!fresh_window && rows[i].power_w > caught_above) caught.push_back(rows[i].power_w);
        if (run.new_batch_size[i]) continue;
        steady.push_back(i);
        throughput.push_back(rows[i].throughput_img_s);
        if (rows[i].throughput_img_s > 0.0) timed_s.push_back(b / rows[i].throughput_img_s);
        step.push_back(run.step_s(i));
      }
      if (steady.size() < options.min_rows) continue;
      // The first step at a new batch size: the autotuning is what it took beyond the steady steps.
      const double steady_step_s = median(step);
      for (const auto i : g.rows) {
        const double extra_s = run.step_s(i) - steady_step_s;
        if (run.new_batch_size[i] && extra_s > options.min_autotune_s) first_steps.push_back({b, f, extra_s});
      }
      if (caught.size() >= 2) {
        // Clipper left the clock to the GPU and the group's clock is what 1-Hz nvidia-smi saw
        // during its steps: weighted at half.
        const double certainty = run.log.kind == bench::P40LogKind::clipper ? 0.5 : 1.0;
        observations.push_back(Observation{"p40", "busy_power_w", label, group, median(caught),
                                           certainty * weight_of(caught.size()),
                                           [model, b, f](const TwinParams& p) {
                                             return p40_caught_power_w(p, model, b, f);
                                           }});
      }
      if (const auto stalls = stall_evidence(timed_s)) {
        // What one stall costs a step of this group: a process start lands anywhere in it, and
        // costs the whole stall only where the host paces the step.
        observations.push_back(Observation{"p40", "sampler_stall_s", label, group, stalls->stall_s, 1.0,
                                           [model, dataset, b, f](const TwinParams& p) {
                                             return p40_felt_stall_s(p, model, dataset, b, f);
                                           }});
        observations.push_back(Observation{"p40", "sampler_stall_rate_hz", label, group, stalls->rate_hz, 1.0,
                                           [](const TwinParams& p) { return 2.0 / p40_sampler(p).period_s(); }});
      }
      observations.push_back(Observation{"p40", "throughput_img_s", label, group, median(throughput),
                                         weight_of(throughput.size()),
                                         [model, dataset, b, f](const TwinParams& p) {
                                           return b / p40_step_s(p, model, dataset, b, f);
                                         }});
      // GPU busy time per step from the utilisation nvidia-smi saw during the group's steps.
      std::vector<double> util;
      for (const auto i : steady) append_step_utilisation(run, i, util);
      if (util.size() >= options.min_smi_samples) {
        double mean_util = 0.0;
        for (const double u : util) mean_util += u / static_cast<double>(util.size());
        const double busy_s = mean_util * steady_step_s;
        if (busy_s > 1e-3) {
          observations.push_back(Observation{"p40", "busy_s", label, group, busy_s, weight_of(util.size()),
                                             [model, b, f](const TwinParams& p) { return p40_busy_s(p, model, b, f); }});
        }
      }
    }
    if (auto o = busy_fraction_observation(run, group, options.busy_fraction_weight)) observations.push_back(std::move(*o));
    if (auto o = caught_fraction_observation(run, group, idle, options.caught_margin_w, options.caught_fraction_weight)) {
      observations.push_back(std::move(*o));
    }
    // The first row: the graph load and the first step, batch 1 at the start clock (a DVFS run
    // starts at batch 256, where the batch's own activity decides). Its maximum decided whether
    // BatchDVFS lowered the clock at once on the tight caps.
    {
      const int b = rows.front().batch_size;
      const double f = run.clock_mhz.front();
      const double certainty = run.log.kind == bench::P40LogKind::clipper ? 0.5 : 1.0;
      observations.push_back(Observation{"p40", "first_step_power_w", fmt::format("{} first step", run.name), group,
                                         rows.front().power_w, certainty,
                                         [model = run.model, b, f](const TwinParams& p) {
                                           const auto& gpu = p.gpus.at(kP40);
                                           const auto& spec = p.models.at(model);
                                           return sim::first_autotune_power_w(gpu, spec, spec.precision, p40_point(gpu, f),
                                                                              p40_profile(p, model, b, f));
                                         }});
    }
    // One observation per run: the median autotuning time of its first steps at new batch sizes
    // (single steps are noisy, and a run that changes batch size often should not outweigh the rest).
    if (first_steps.size() >= options.min_rows) {
      std::vector<double> extra;
      for (const auto& s : first_steps) extra.push_back(s.extra_s);
      const auto label = fmt::format("{} first steps at new batch sizes", run.name);
      observations.push_back(Observation{"p40", "autotune_s", label, group, median(extra), weight_of(first_steps.size()),
                                         [model = run.model, first_steps](const TwinParams& p) {
                                           std::vector<double> predicted;
                                           for (const auto& s : first_steps) {
                                             predicted.push_back(p40_autotune_s(p, model, s.batch, s.clock_mhz));
                                           }
                                           return median(predicted);
                                         }});
    }
  }
  return observations;
}

std::vector<FitParameter> p40_fit_parameters(const std::vector<P40Run>& runs) {
  std::vector<FitParameter> parameters = {
      {FileKind::gpu, kP40, "voltage.min_v", 0.6, 1.06, 0.1},
      {FileKind::gpu, kP40, "voltage.knee_mhz", 560.0, 1500.0, 0.0},
      {FileKind::gpu, kP40, "power_model.constant_w", 1.0, 80.0, 0.0},
      {FileKind::gpu, kP40, "power_model.static_w", 1.0, 80.0, 0.0},
      {FileKind::gpu, kP40, "power_model.clock_tree_w", 0.5, 80.0, 0.0},
      {FileKind::gpu, kP40, "power_model.sm_dynamic_w", 20.0, 400.0, 0.0},
      {FileKind::gpu, kP40, "power_model.memory_dynamic_w", 1.0, 100.0, 1.0},
      {FileKind::gpu, kP40, "saturation_kelems_per_sm", 0.5, 2000.0, 1.0},
      {FileKind::gpu, kP40, "host.batch_sync_s", 1e-5, 0.05, 1.0},
      {FileKind::gpu, kP40, "host.layer_launch_s", 1e-6, 1e-3, 2.0},
      {FileKind::gpu, kP40, "busy_overlap_exponent", 1.0, 16.0, 1.0},
      {FileKind::gpu, kP40, "sensor.averaging_window_s", 0.02, 1.0, 1.0},
      {FileKind::gpu, kP40, "sensor.hold_s", 0.001, 0.5, 0.0},
      {FileKind::gpu, kP40, "activity_spread", 0.01, 1.0, 2.0},
      {FileKind::gpu, kP40, "autotune_compute_factor", 0.1, 200.0, 2.0},
      {FileKind::gpu, kP40, "autotune_fixed_s", 1e-3, 10.0, 2.0},
      {FileKind::gpu, kP40, "first_autotune_batch", 1.0, 256.0, 2.0},
      {FileKind::gpu, kP40, "clock_scaling_exponent", 0.3, 1.5, 1.0},
      // Bounds that keep a stall shorter than a process (check_spawned_sampler).
      {FileKind::gpu, kP40, "host.nvidia_smi_process_s", 0.08, 2.0, 1.0},
      {FileKind::gpu, kP40, "host.nvidia_smi_stall_s", 0.001, 0.079, 1.0},
  };
  std::set<std::string> models, datasets;
  for (const auto& run : runs) {
    models.insert(run.model);
    datasets.insert(run.dataset);
  }
  for (const auto& model : models) {
    parameters.push_back({FileKind::model, model, "power_intensity", 0.2, 3.0, 2.0});
    parameters.push_back({FileKind::model, model, "compute_efficiency.fp32", 0.02, 1.0, 2.0});
    parameters.push_back({FileKind::model, model, "activation_melems", 0.05, 2000.0, 2.0});
  }
  for (const auto& dataset : datasets) {
    parameters.push_back({FileKind::dataset, dataset, "host_s_per_image", 1e-4, 0.1, 1.0});
    parameters.push_back({FileKind::dataset, dataset, "host_s_per_mpixel", 1e-5, 0.5, 1.0});
    parameters.push_back({FileKind::dataset, dataset, "host_s_per_batch", 1e-5, 0.5, 1.0});
  }
  return parameters;
}

}  // namespace gpucap::calibrate
