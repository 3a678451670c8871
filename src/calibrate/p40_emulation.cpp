#include "gpucap/calibrate/p40_emulation.hpp"

#include <algorithm>
#include <cmath>

#include "gpucap/calibrate/p40_observations.hpp"
#include "gpucap/sim/noise.hpp"

namespace gpucap::calibrate {

namespace {

// The twin's true power over a run: per step, idle then busy.
struct Segment {
  double start_s;
  double end_s;
  double power_w;
};

class Waveform {
 public:
  void add(double start_s, double end_s, double power_w) {
    if (end_s > start_s) segments_.push_back({start_s, end_s, power_w});
  }

  // Mean true power over [from, to].
  [[nodiscard]] double average(double from, double to) const {
    if (to <= from) return power_at(to);
    auto it = std::upper_bound(segments_.begin(), segments_.end(), from,
                               [](double t, const Segment& s) { return t < s.end_s; });
    double energy = 0.0, covered = 0.0;
    for (; it != segments_.end() && it->start_s < to; ++it) {
      const double a = std::max(from, it->start_s);
      const double b = std::min(to, it->end_s);
      if (b > a) {
        energy += it->power_w * (b - a);
        covered += b - a;
      }
    }
    return covered > 0.0 ? energy / covered : power_at(to);
  }

  // The highest mean over any `window` that ends within [from, to]: what a sensor that holds its
  // highest reading for to − from shows at `to`. The mean is piecewise linear in the window's end,
  // so its maximum lies at `from`, `to`, or where either edge of the window crosses a boundary.
  [[nodiscard]] double highest_average(double from, double to, double window) const {
    double best = average(to - window, to);
    const auto consider = [&](double end) {
      if (end >= from && end < to) best = std::max(best, average(end - window, end));
    };
    consider(from);
    auto it = std::upper_bound(segments_.begin(), segments_.end(), from - window,
                               [](double t, const Segment& s) { return t < s.end_s; });
    for (; it != segments_.end() && it->start_s < to; ++it) {
      for (const double b : {it->start_s, it->end_s}) {
        consider(b);
        consider(b + window);
      }
    }
    return best;
  }

  [[nodiscard]] double power_at(double t) const {
    auto it = std::upper_bound(segments_.begin(), segments_.end(), t,
                               [](double x, const Segment& s) { return x < s.end_s; });
    if (it == segments_.end()) return segments_.empty() ? 0.0 : segments_.back().power_w;
    return it->power_w;
  }

 private:
  std::vector<Segment> segments_;
};

// The upper median (no averaging of the two middle values: a prediction is one of the maxima).
double upper_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::vector<EmulatedRow> emulate_p40_run(const P40Run& run, const TwinParams& params, const HarnessParams& harness) {
  const auto& rows = run.log.rows;
  std::vector<EmulatedRow> out;
  if (rows.size() < 3) return out;
  const auto& gpu = params.gpus.at(kP40);

  Waveform wave;
  for (std::size_t j = 1; j < rows.size(); ++j) {
    // Within the step: idle while the CPU decodes, then (for a new batch size) the autotuning,
    // then the batch's compute: its wide layers, then its narrow ones. What does not fit in the
    // logged step is cut from the front.
    const auto phases =
        p40_step_phases(params, run.model, rows[j].batch_size, run.clock_mhz[j], run.new_batch_size[j]);
    double t = rows[j].time_s;
    const double start = rows[j - 1].time_s;
    const double second_from = std::max(start, t - phases.compute_s / 2.0);
    const double first_from = std::max(start, second_from - phases.compute_s / 2.0);
    const double autotune_from = std::max(start, first_from - phases.autotune_s);
    wave.add(start, autotune_from, phases.idle_w);
    wave.add(autotune_from, first_from, phases.halves.mean_w());
    wave.add(first_from, second_from, phases.halves.first_w);
    wave.add(second_from, t, phases.halves.second_w);
  }

  const double averaging_s = gpu.sensor.averaging_window_s;
  const double period_s = harness.sampler_period_s.value_or(p40_sampler(params).period_s());
  sim::Noise noise(sim::derive_seed(1, static_cast<std::uint64_t>(run.job)));
  std::size_t window_start_row = 0;  // the window of row i opened when row window_start_row was logged
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (run.window_closed[i - 1]) window_start_row = i - 1;
    const double from = rows[window_start_row].time_s;
    const double to = rows[i].time_s;
    if (i + 1 < rows.size()) {
      EmulatedRow r;
      r.row = i;
      r.logged_power_w = rows[i].power_w;
      r.logged_throughput = rows[i].throughput_img_s;
      const int batch = rows[i].batch_size;
      const double autotune_s =
          run.new_batch_size[i] ? p40_autotune_s(params, run.model, batch, run.clock_mhz[i]) : 0.0;
      r.throughput = batch / (p40_step_s(params, run.model, run.dataset, batch, run.clock_mhz[i]) + autotune_s);
      std::vector<double> maxima;
      for (int k = 0; k < harness.phases; ++k) {
        const double phase = (k + 0.5) / harness.phases * period_s;
        double max_w = -1.0;
        // Samples at multiples of the period (plus the phase) since the run's first row.
        const double origin = rows.front().time_s + phase;
        for (double t = origin + std::ceil((from - origin) / period_s) * period_s; t <= to; t += period_s) {
          if (t <= from) continue;
          const double reading = wave.highest_average(t - gpu.sensor.hold_s, t, averaging_s) *
                                 (1.0 + gpu.sensor.noise_fraction * noise.gaussian());
          max_w = std::max(max_w, reading);
        }
        // An empty list: upstream waited 1 s for a sample, which saw the GPU idle.
        maxima.push_back(max_w >= 0.0 ? max_w : p40_idle_power_w(params, run.clock_mhz[i]));
      }
      r.power_w = upper_median(maxima);
      r.mean_w = wave.average(from, to);
      double sum = 0.0;
      int n = 0;
      for (const auto& s : run.smi) {
        if (s.time_s > from && s.time_s <= to) {
          sum += s.power_w;
          ++n;
        }
      }
      if (n > 0) r.logged_mean_w = sum / n;
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace gpucap::calibrate
