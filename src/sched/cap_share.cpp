#include "gpucap/sched/cap_share.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpucap/core/error.hpp"

namespace gpucap::sched {
namespace {

constexpr double kSloHeadroom = 0.85;   // predicted worst case within 85 % of the objective
constexpr double kMarginStep = 0.02;    // a window over the cap: 2 % more of it kept free
constexpr double kMarginDecay = 0.005;  // a quiet window: 0.5 % less
constexpr double kMarginMin = 0.03;
constexpr double kMarginMax = 0.30;
constexpr double kDrainQuantile = 0.99;  // the SLO is a p99

const JobSpec* find_foreground(const ShareScenario& s) {
  const JobSpec* best = nullptr;
  for (const auto& job : s.jobs) {
    if (job.mode == Mode::inference && job.slo_ms && (best == nullptr || job.priority > best->priority)) best = &job;
  }
  return best;
}

const JobSpec* find_background(const ShareScenario& s) {
  const JobSpec* best = nullptr;
  for (const auto& job : s.jobs) {
    if (job.mode == Mode::training && (best == nullptr || job.priority < best->priority)) best = &job;
  }
  return best;
}

double dynamic(const DeviceInfo& gpu, double busy_w, const ClockScaling& s) {
  return gpu.idle_power_w + (busy_w - gpu.idle_power_w) * s.dynamic_power;
}

double kernels_s(const StepProfile& p, double time_scale) {
  double total = 0.0;
  for (const double k : p.kernels_s) total += k * time_scale;
  return total;
}

// The kernels launched behind kernel i within a window: i + 1 … i + window − 1 (of the step).
std::vector<double> behind_s(const std::vector<double>& kernels_s, int window) {
  std::vector<double> behind(kernels_s.size(), 0.0);
  for (std::size_t i = 0; i < kernels_s.size(); ++i) {
    for (std::size_t k = i + 1; k < kernels_s.size() && k < i + static_cast<std::size_t>(std::max(1, window)); ++k) {
      behind[i] += kernels_s[k];
    }
  }
  return behind;
}

// P(drain > x) for drain_quantile_s: kernel i is in flight with probability k_i / K, its
// residual uniform in [0, k_i], and `behind[i]` waits after it.
double drain_exceeds(const std::vector<double>& kernels_s, const std::vector<double>& behind, double total_s, double x) {
  double p = 0.0;
  for (std::size_t i = 0; i < kernels_s.size(); ++i) p += std::clamp(kernels_s[i] - std::max(0.0, x - behind[i]), 0.0, kernels_s[i]);
  return p / total_s;
}

}  // namespace

double drain_quantile_s(const std::vector<double>& kernels_s, int window, double quantile) {
  const auto behind = behind_s(kernels_s, window);
  double total = 0.0;
  double hi = 0.0;
  for (std::size_t i = 0; i < kernels_s.size(); ++i) {
    total += kernels_s[i];
    hi = std::max(hi, kernels_s[i] + behind[i]);
  }
  if (!(total > 0.0)) return 0.0;
  double lo = 0.0;
  for (int i = 0; i < 60; ++i) {  // P(drain > x) falls with x
    const double mid = 0.5 * (lo + hi);
    (drain_exceeds(kernels_s, behind, total, mid) > 1.0 - quantile ? lo : hi) = mid;
  }
  return hi;
}

CapShareTable build_cap_share_table(const ShareScenario& scenario, const StepModel& model, int min_batch) {
  const auto* fg = find_foreground(scenario);
  const auto* bg = find_background(scenario);
  if (fg == nullptr || bg == nullptr) {
    throw usage_error("capshare needs an inference job with slo_ms= and a training job to share the cap with");
  }
  if (!fg->rate_per_s) throw usage_error(fmt::format("capshare: job {} needs rate= (requests per second) to budget the GPU", fg->name));
  const auto levels = model.clock_levels_mhz(scenario.gpu);
  if (levels.empty()) throw usage_error(fmt::format("capshare: the model has no clock levels for {}", scenario.gpu.id));
  CapShareTable t;
  t.foreground = fg->name;
  t.background = bg->name;
  t.foreground_rate_per_s = *fg->rate_per_s;
  t.slo_s = *fg->slo_ms / 1e3;
  t.idle_power_w = scenario.gpu.idle_power_w;
  const auto fg_profile = model.step(*fg, scenario.gpu, 0);
  std::vector<int> batches;
  for (int b = bg->batch_size; b >= std::max(1, min_batch); b /= 2) batches.push_back(b);
  std::vector<StepProfile> bg_profiles;
  for (const int b : batches) {
    JobSpec spec = *bg;
    spec.batch_size = b;
    bg_profiles.push_back(model.step(spec, scenario.gpu, 0));
    bg_profiles.back().launch_window = kCapShareBackgroundWindow;  // as the controller runs it
  }
  std::vector<double> drains;
  for (const auto& p : bg_profiles) drains.push_back(drain_quantile_s(p.kernels_s, kCapShareBackgroundWindow, kDrainQuantile));
  for (const double f : levels) {
    const auto fs = model.clock_scaling(scenario.gpu, Mode::inference, f);
    const double fg_gpu = fg_profile.device_s(fs.time);
    t.fg.push_back({f, fg_profile.host_s + fg_gpu, fg_gpu, kernels_s(fg_profile, fs.time), dynamic(scenario.gpu, fg_profile.busy_power_w, fs)});
    const auto bs = model.clock_scaling(scenario.gpu, Mode::training, f);
    for (std::size_t i = 0; i < batches.size(); ++i) {
      const auto& p = bg_profiles[i];
      t.bg.push_back({f, batches[i], p.host_s, p.device_s(bs.time), kernels_s(p, bs.time), drains[i] * bs.time,
                      dynamic(scenario.gpu, p.busy_power_w, bs)});
    }
  }
  return t;
}

std::optional<CapShareController::Choice> CapShareController::best(double cap_w, bool foreground_live, double margin,
                                                                    int running_batch) const {
  std::optional<Choice> chosen;
  for (const auto& fg : table_.fg) {
    const double fg_util = foreground_live ? table_.foreground_rate_per_s * fg.gpu_s : 0.0;
    if (fg_util >= 1.0) continue;
    // What a background batch costs at this clock: its power and the foreground's worst latency.
    const auto fits = [&](const CapShareBackground& bg, double* items, double* power, bool check_slo) {
      // The foreground's slow requests: a drain of the background's launched kernels, then itself.
      if (check_slo && foreground_live && fg.latency_s + bg.drain_p99_s > kSloHeadroom * table_.slo_s) {
        return false;
      }
      const double bg_util = std::min(bg.gpu_s / (bg.host_s + bg.gpu_s), 1.0 - fg_util);
      // Busy power only while kernels run: a host-paced request holds the GPU but mostly idles it.
      const double fg_busy = foreground_live ? table_.foreground_rate_per_s * fg.busy_s : 0.0;
      const double bg_busy = bg_util * bg.busy_s / bg.gpu_s;
      *power = table_.idle_power_w + fg_busy * (fg.busy_power_w - table_.idle_power_w) +
               bg_busy * (bg.busy_power_w - table_.idle_power_w);
      *items = bg.batch_size * bg_util / bg.gpu_s;
      return cap_w <= 0.0 || *power <= cap_w * (1.0 - margin);
    };
    const CapShareBackground* running = nullptr;
    for (const auto& bg : table_.bg) {
      if (bg.clock_mhz == fg.clock_mhz && bg.batch_size == running_batch) running = &bg;
    }
    double running_items = 0.0;
    double running_power = 0.0;
    // The step in progress keeps its batch: only its power matters now (its drain cannot be undone).
    if (running != nullptr && !fits(*running, &running_items, &running_power, false)) continue;
    for (const auto& bg : table_.bg) {
      if (bg.clock_mhz != fg.clock_mhz) continue;
      double items = 0.0;
      double power = 0.0;
      if (!fits(bg, &items, &power, true)) continue;
      if (!chosen || items > chosen->background_items_s + 1e-9 ||
          (items > chosen->background_items_s - 1e-9 && power < chosen->mean_power_w)) {
        chosen = Choice{fg.clock_mhz, bg.batch_size, items, std::max(power, running_power)};
      }
    }
  }
  return chosen;
}

ShareKnobs CapShareController::decide(const ShareObservation& o) {
  bool foreground_live = false;
  int running_batch = 0;
  for (const auto& job : o.jobs) {
    if (job.name == table_.foreground) foreground_live = job.live;
    if (job.name == table_.background && job.live) running_batch = job.batch_size;
  }
  // Feedback on the last window: over the cap, keep more of it free; well under, a little less.
  if (o.last_window && o.last_window->cap_w > 0.0 && o.last_window->end_s == o.now_s) {
    const auto& w = *o.last_window;
    if (w.mean_power_w > w.cap_w) {
      margin_ = std::min(kMarginMax, margin_ + kMarginStep);
    } else if (w.mean_power_w < w.cap_w * (1.0 - margin_ - 0.05)) {
      margin_ = std::max(kMarginMin, margin_ - kMarginDecay);
    }
  }
  ShareKnobs knobs;
  auto choice = best(o.cap_w, foreground_live, margin_, running_batch);
  if (!choice) choice = best(o.cap_w, foreground_live, margin_);  // no clock suits the running batch too
  if (choice) {
    knobs.gpu_clock_mhz = choice->clock_mhz;
    knobs.batch_size[table_.background] = choice->batch_size;
  } else {  // nothing fits: the lowest clock and the smallest batch, the least the GPU can draw
    knobs.gpu_clock_mhz = table_.fg.front().clock_mhz;
    int smallest = table_.bg.front().batch_size;
    for (const auto& bg : table_.bg) smallest = std::min(smallest, bg.batch_size);
    knobs.batch_size[table_.background] = smallest;
  }
  // Always, not only while the foreground is live: the foreground's first request would otherwise
  // wait for everything the background had launched before it arrived.
  knobs.launch_window[table_.background] = kCapShareBackgroundWindow;
  return knobs;
}

}  // namespace gpucap::sched
