#include "gpucap/runtime/runner.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <cmath>
#include <limits>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/device/control_session.hpp"

namespace gpucap::runtime {

namespace {

void check_permissions(device::Device& device, const control::Controller& controller) {
  const auto needs = controller.requirements();
  std::vector<std::string> missing;
  const auto need = [&](bool needed, device::Control control) {
    if (needed && !(device.has_control(control) && device.can_write(control))) {
      missing.emplace_back(device::describe(control).name);
    }
  };
  need(needs.sm_clock, device::Control::sm_clock_lock_mhz);
  need(needs.memory_clock, device::Control::memory_clock_lock_mhz);
  need(needs.power_limit, device::Control::power_limit_w);
  if (!missing.empty()) {
    throw Error(ErrorCode::unsupported,
                fmt::format("{} needs write access to {} on {}; run with GPU control permission (gpucap run "
                            "--allow-gpu-control, as root), or use batchsizer (batch size only)",
                            controller.name(), join(missing, ", "), device.name()));
  }
}

// The state of the window being measured.
struct Window {
  double start_s = 0.0;
  int batches = 0;
  long long images = 0;
  std::vector<long long> tenant_images;
  double latency_sum_s = 0.0;
  WindowAccumulator power;
  WindowAccumulator settled_power;  // samples from settled_from_s on
  double settled_from_s = 0.0;
  long long samples_over_cap = 0;  // each judged against the cap in force when it was taken
  bool cap_transition = false;     // some sample was taken during a cap transition

  void add_tenant_images(int tenant, long long count) {
    const auto index = static_cast<std::size_t>(tenant);
    if (tenant_images.size() <= index) tenant_images.resize(index + 1, 0);
    tenant_images[index] += count;
  }

  void restart(double now_s) {
    cap_transition = false;
    start_s = now_s;
    settled_from_s = now_s;
    settled_power.reset();
    batches = 0;
    images = 0;
    tenant_images.clear();
    latency_sum_s = 0.0;
    power.reset();
    samples_over_cap = 0;
  }
};

// The GPU's faults a run rides out (a driver that answers a call with an error now and then):
// each kind is logged once, when it first happens, and all are counted in one line at the end.
class GpuFaults {
 public:
  void note(const std::string& kind, const std::string& first_message) {
    auto it = std::find_if(counts_.begin(), counts_.end(), [&kind](const auto& entry) { return entry.first == kind; });
    if (it == counts_.end()) {
      spdlog::warn("{}", first_message);
      counts_.emplace_back(kind, 1);
    } else {
      ++it->second;
    }
  }
  void report() const {
    if (counts_.empty()) return;
    std::vector<std::string> parts;
    for (const auto& [kind, count] : counts_) parts.push_back(fmt::format("{} x{}", kind, count));
    spdlog::warn("GPU faults ridden out in this run: {}", join(parts, ", "));
  }

 private:
  std::vector<std::pair<std::string, std::size_t>> counts_;
};

// A device error is a fault to ride out; any other error (a bad value, no permission) is not.
bool is_device_fault(const Error& e) { return e.code() == ErrorCode::device; }

class JobRun {
 public:
  JobRun(Platform& platform, control::Controller& controller, const RunConfig& config, const TraceSink& sink)
      : platform_(platform), controller_(controller), config_(config), sink_(sink) {}

  RunSummary run() {
    check_permissions(platform_.device(), controller_);
    check_run_limits(config_.images, config_.duration_s);
    if (!(config_.wait_without_sample_s >= 0.0 && config_.wait_without_sample_s <= 60.0)) {
      throw usage_error(fmt::format("wait without a sample {:g} s must be between 0 and 60 s", config_.wait_without_sample_s));
    }
    const auto owned_session = platform_.open_control_session();
    auto& session = *owned_session;
    knobs_ = controller_.initial_knobs(cap_at(0.0));
    apply_first(session);
    platform_.settle();

    start_s_ = platform_.clock().now_s();
    last_sample_cap_w_ = cap_at(0.0);
    // Readings from before the job (while settling) are not the job's.
    platform_.meter().collect(start_s_, [](const PowerSample&) {});
    // Without an energy counter (GPUs before Volta), energy is the integral of the samples.
    const bool has_counter = platform_.device().has_signal(device::Signal::energy_j);
    counted_energy_ = has_counter;
    const auto energy_start_j = read_energy_j();
    counted_energy_ = energy_start_j.has_value();
    window_.restart(start_s_);
    last_sample_s_ = start_s_;
    long long done = 0;
    while (!finished(done)) {
      const auto result = run_next_batch(done);
      done += result.images;
      window_.batches += 1;
      window_.images += result.images;
      if (result.tenant_images.empty()) {
        window_.add_tenant_images(result.tenant, result.images);
      } else {
        for (std::size_t t = 0; t < result.tenant_images.size(); ++t) {
          window_.add_tenant_images(static_cast<int>(t), result.tenant_images[t]);
        }
      }
      window_.latency_sum_s += result.latency_s();
      collect_samples(platform_.clock().now_s());
      if (window_.power.count() == 0 && config_.wait_without_sample_s > 0.0) {
        platform_.wait(config_.wait_without_sample_s);
        collect_samples(platform_.clock().now_s());
      }
      const double now_s = platform_.clock().now_s();
      if (!controller_.period().due(now_s - window_.start_s, window_.batches) && !cap_changed_in_window(now_s)) {
        continue;
      }
      if (window_.power.count() == 0) continue;  // no reading yet: a decision needs a measurement
      const auto observation = close_window(now_s);
      const auto previous = knobs_;
      knobs_ = controller_.decide(observation);
      spdlog::debug("t={:.2f}s cap={:g}W max={:.1f}W settled_max={:.1f}W mean={:.1f}W -> {} [{}]", observation.time_s,
                    observation.cap_w, observation.power.max_w, observation.settled_power.max_w,
                    observation.power.mean_w, describe(knobs_), controller_.describe_state());
      if (counted_energy_) read_energy_j();  // the counter read often: a reset costs one window's part
      apply_or_hold(session, previous);
      if (knobs_ != previous) window_.settled_from_s = now_s + platform_.power_settle_s();
      // The controller has answered a cap change: once the reading shows its answer, the
      // transition is over.
      if (transition_end_s_ == kOpenTransition) transition_end_s_ = now_s + platform_.power_settle_s();
    }
    if (window_.batches > 0) {
      // The last, partial window is a window only if it holds a measurement; its images count in
      // the summary either way.
      const double now_s = platform_.clock().now_s();
      collect_samples(now_s);
      if (window_.power.count() > 0) close_window(now_s);
    }
    // The time after the last sample is charged at its power.
    const double tail_j = last_sample_w_ * std::max(0.0, platform_.clock().now_s() - last_sample_s_);
    const auto energy_end_j = counted_energy_ ? read_energy_j() : std::nullopt;
    summary_.energy_j = energy_end_j ? *energy_end_j - *energy_start_j : sampled_energy_j_ + tail_j;
    if (has_counter && !energy_end_j) {
      faults_.note("energy from the samples", "the run's energy is the integral of the power samples: the energy "
                                              "counter could not be read at the run's start or end");
    }
    if (!std::isfinite(summary_.energy_j) || summary_.energy_j < 0.0) {
      faults_.note("energy from the samples", fmt::format("the energy counter gave {} J for the run: its energy is the "
                                                          "integral of the power samples instead", summary_.energy_j));
      summary_.energy_j = sampled_energy_j_ + tail_j;
    }
    faults_.report();
    summary_.stopped = stop_requested();
    summary_.device_writes = session.writes();
    session.restore();  // explicit, so a failed restore surfaces as an error
    return finish(done);
  }

 private:
  // The first settings: a device error is tried again a few times (there are no earlier
  // settings of this run to hold), then it ends the run.
  void apply_first(device::ControlSession& session) {
    constexpr int kAttempts = 5;
    for (int attempt = 1;; ++attempt) {
      try {
        session.apply(knobs_);
        return;
      } catch (const Error& e) {
        if (!is_device_fault(e) || attempt == kAttempts) throw;
        faults_.note("failed writes", fmt::format("writing the GPU's first settings failed ({}): trying again", e.what()));
      }
    }
  }

  // The controller's decision, or — when the GPU refuses it with a device error — the settings
  // in force before it (ControlSession::apply rolled back what it had written), tried again at
  // the next decision.
  void apply_or_hold(device::ControlSession& session, const Knobs& previous) {
    try {
      session.apply(knobs_);
    } catch (const Error& e) {
      if (!is_device_fault(e)) throw;
      faults_.note("failed writes", fmt::format("writing the GPU's settings failed ({}): holding the last settings "
                                                "({}) until the next decision",
                                                e.what(), describe(previous)));
      knobs_ = previous;
    }
  }

  // The energy counter in J (monotonic from the open: the device takes a restart as a reset);
  // nullopt when this reading failed.
  std::optional<double> read_energy_j() {
    if (!counted_energy_) return std::nullopt;
    try {
      return platform_.device().read(device::Signal::energy_j);
    } catch (const Error& e) {
      if (!is_device_fault(e)) throw;
      faults_.note("failed energy readings", fmt::format("reading the energy counter failed ({}): skipped", e.what()));
      return std::nullopt;
    }
  }

  // A clock reading for the trace, or the last one when this reading failed.
  double read_clock_mhz(device::Signal signal, double& last) {
    try {
      last = platform_.device().read(signal);
    } catch (const Error& e) {
      if (!is_device_fault(e)) throw;
      faults_.note("failed clock readings",
                   fmt::format("reading the GPU's clock failed ({}): the trace repeats the last reading", e.what()));
    }
    return last;
  }

  // The cap in force at t (seconds from the start): the live cap when there is one.
  [[nodiscard]] double cap_at(double t_s) const {
    return config_.live_cap ? config_.live_cap->cap_at(t_s) : config_.schedule.cap_at(t_s);
  }

  // One process at 100 % runs batch by batch (the last one trimmed to the images left); MPS
  // tenants run until the next batch of any of them finishes.
  engine::BatchResult run_next_batch(long long done) {
    const auto& tenants = knobs_.tenants;
    if (tenants.size() == 1 && tenants.front().mps_share_pct == 100.0) {
      const long long left = config_.images > 0 ? config_.images - done : knobs_.batch_size();
      return platform_.engine().run_batch(static_cast<int>(std::min<long long>(knobs_.batch_size(), left)));
    }
    return platform_.engine().run_tenants(tenants);
  }

  [[nodiscard]] bool stop_requested() const { return config_.stop != nullptr && config_.stop->load(); }

  [[nodiscard]] bool finished(long long done) const {
    if (stop_requested()) return true;
    if (config_.images > 0 && done >= config_.images) return true;
    return config_.duration_s > 0.0 && platform_.clock().now_s() - start_s_ >= config_.duration_s;
  }

  // For controllers that react to cap changes: whether the cap now differs from the one in force
  // when the window started.
  [[nodiscard]] bool cap_changed_in_window(double now_s) const {
    return controller_.reacts_to_cap_changes() &&
           cap_at(now_s - start_s_) != cap_at(window_.start_s - start_s_);
  }

  // Streams the meter's new samples into the window: statistics and the per-sample cap check;
  // then hands the newest one to RunConfig::on_power_sample.
  void collect_samples(double now_s) {
    std::optional<PowerSample> newest;
    platform_.meter().collect(now_s, [this, &newest](const PowerSample& sample) {
      newest = sample;
      // Each sample stands for the time since the one before (a sampler can be late).
      sampled_energy_j_ += sample.power_w * std::max(0.0, sample.time_s - last_sample_s_);
      last_sample_s_ = sample.time_s;
      last_sample_w_ = sample.power_w;
      window_.power.add(sample.power_w);
      if (sample.time_s >= window_.settled_from_s) window_.settled_power.add(sample.power_w);
      const double cap_w = cap_at(sample.time_s - start_s_);
      if (cap_w != last_sample_cap_w_) transition_end_s_ = kOpenTransition;
      last_sample_cap_w_ = cap_w;
      if (sample.time_s <= transition_end_s_) window_.cap_transition = true;
      summary_.max_power_w = std::max(summary_.max_power_w, sample.power_w);
      if (sample.power_w > cap_at(sample.time_s - start_s_)) ++window_.samples_over_cap;
    });
    if (newest && config_.on_power_sample) {
      config_.on_power_sample(*newest, cap_at(newest->time_s - start_s_));
    }
  }

  Observation close_window(double now_s) {
    Observation obs;
    obs.time_s = now_s - start_s_;
    obs.cap_w = cap_at(obs.time_s);
    obs.power = window_.power.stats(window_.start_s - start_s_, obs.time_s);
    if (window_.settled_power.count() > 0) {
      obs.settled_power = window_.settled_power.stats(window_.settled_from_s - start_s_, obs.time_s);
    }
    const double duration_s = now_s - window_.start_s;
    obs.throughput_img_s = duration_s > 0.0 ? static_cast<double>(window_.images) / duration_s : 0.0;
    obs.tenant_throughput_img_s.assign(knobs_.tenants.size(), 0.0);
    for (std::size_t i = 0; i < window_.tenant_images.size() && i < knobs_.tenants.size(); ++i) {
      obs.tenant_throughput_img_s[i] = duration_s > 0.0 ? static_cast<double>(window_.tenant_images[i]) / duration_s : 0.0;
    }
    obs.mean_batch_latency_s = window_.latency_sum_s / window_.batches;
    obs.batches = window_.batches;
    obs.knobs = knobs_;

    TraceRow row;
    row.time_s = obs.time_s;
    row.window_start_s = obs.power.start_s;
    row.cap_w = obs.cap_w;
    row.window_max_w = obs.power.max_w;
    row.window_mean_w = obs.power.mean_w;
    row.samples = obs.power.samples;
    row.batch_size = knobs_.batch_size();
    row.tenants = knobs_.tenants;
    row.sm_clock_mhz = read_clock_mhz(device::Signal::sm_clock_mhz, last_sm_clock_mhz_);
    row.memory_clock_mhz = read_clock_mhz(device::Signal::memory_clock_mhz, last_memory_clock_mhz_);
    row.throughput_img_s = obs.throughput_img_s;
    row.images = window_.images;
    row.over_cap = window_.samples_over_cap > 0;
    row.cap_transition = window_.cap_transition;
    summary_.time_over_cap_s += static_cast<double>(window_.samples_over_cap) / platform_.meter().sample_hz();
    record(row);
    window_.restart(now_s);
    return obs;
  }

  void record(const TraceRow& row) {
    ++summary_.windows;
    if (row.over_cap) ++summary_.windows_over_cap;
    if (sink_) sink_(row);
  }

  RunSummary finish(long long images) {
    summary_.simulated = platform_.simulated();
    summary_.images = images;
    summary_.duration_s = platform_.clock().now_s() - start_s_;
    summary_.throughput_img_s = summary_.duration_s > 0.0 ? static_cast<double>(images) / summary_.duration_s : 0.0;
    summary_.images_per_joule = summary_.energy_j > 0.0 ? static_cast<double>(images) / summary_.energy_j : 0.0;
    summary_.mean_power_w = summary_.duration_s > 0.0 ? summary_.energy_j / summary_.duration_s : 0.0;
    summary_.over_cap_windows_pct =
        summary_.windows > 0 ? 100.0 * summary_.windows_over_cap / summary_.windows : 0.0;
    return summary_;
  }

  Platform& platform_;
  control::Controller& controller_;
  const RunConfig& config_;
  const TraceSink& sink_;
  Knobs knobs_;
  double start_s_ = 0.0;
  Window window_;
  // A cap transition runs from a change of the cap until the reading shows the controller's first
  // answer to it (its next decision plus the sensor's averaging time).
  static constexpr double kOpenTransition = std::numeric_limits<double>::infinity();
  double transition_end_s_ = -kOpenTransition;
  double last_sample_cap_w_ = 0.0;
  RunSummary summary_;
  double sampled_energy_j_ = 0.0;
  double last_sample_s_ = 0.0;
  double last_sample_w_ = 0.0;
  bool counted_energy_ = false;
  double last_sm_clock_mhz_ = 0.0;
  double last_memory_clock_mhz_ = 0.0;
  GpuFaults faults_;
};

}  // namespace

void check_run_limits(long long images, double duration_s) {
  if (images < 0 || images > kMaxRunImages) {
    throw usage_error(fmt::format("image count {} must be between 1 and {}", images, kMaxRunImages));
  }
  if (!std::isfinite(duration_s) || duration_s < 0.0 || duration_s > kMaxRunDurationS) {
    throw usage_error(fmt::format("duration {:g} s must be a number between 0 and {:g} s", duration_s, kMaxRunDurationS));
  }
  if (images == 0 && duration_s == 0.0) throw usage_error("a run needs a number of images or a duration");
}

RunSummary run_job(Platform& platform, control::Controller& controller, const RunConfig& config,
                   const TraceSink& sink) {
  return JobRun(platform, controller, config, sink).run();
}

std::string trace_csv_header() {
  return "time_s,window_start_s,cap_w,window_max_w,window_mean_w,samples,batch_size,sm_clock_mhz,"
         "mem_clock_mhz,throughput_img_s,images,over_cap,cap_transition,tenants,platform\n";
}

std::string trace_csv_row(const TraceRow& row, bool simulated) {
  // Tenants as share:batch, ';'-separated ("50:16;25:8").
  std::string tenants;
  for (const auto& tenant : row.tenants) {
    tenants += fmt::format("{}{:g}:{}", tenants.empty() ? "" : ";", tenant.mps_share_pct, tenant.batch_size);
  }
  return fmt::format("{:.3f},{:.3f},{:g},{:.2f},{:.2f},{},{},{:g},{:g},{:.2f},{},{},{},{},{}\n", row.time_s,
                     row.window_start_s, row.cap_w, row.window_max_w, row.window_mean_w, row.samples,
                     row.batch_size, row.sm_clock_mhz, row.memory_clock_mhz, row.throughput_img_s, row.images,
                     row.over_cap ? 1 : 0, row.cap_transition ? 1 : 0, tenants, simulated ? "sim" : "real");
}

}  // namespace gpucap::runtime
