#include "gpucap/sim/gpu_twin.hpp"

#include <algorithm>
#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::sim {

namespace {
constexpr std::uint64_t kSensorStream = 1;
constexpr std::uint64_t kLatencyStream = 2;
}  // namespace

GpuTwin::GpuTwin(GpuSpec gpu, ModelSpec model, Precision precision, std::uint64_t seed, InputPipeline pipeline)
    : gpu_(std::move(gpu)),
      model_(std::move(model)),
      precision_(precision),
      pipeline_(pipeline),
      sensor_(gpu_.sensor,
              idle_loaded_power_w(gpu_, OperatingPoint{gpu_.boost_clock_mhz, gpu_.default_memory_clock_mhz}),
              derive_seed(seed, kSensorStream)),
      latency_noise_(derive_seed(seed, kLatencyStream)) {
  current_sm_mhz_ = requested_sm_clock_mhz();
  current_power_w_ = idle_loaded_power_w(gpu_, OperatingPoint{current_sm_mhz_, memory_clock_mhz()});
}

void GpuTwin::set_spawned_sampler(std::optional<SpawnedSampler> sampler) {
  if (sampler) check_spawned_sampler(*sampler);
  spawned_sampler_ = sampler;
}

void GpuTwin::set_governor_sm_clock(std::optional<double> mhz) {
  governor_sm_mhz_ = mhz ? std::optional<double>(nearest_clock_mhz(gpu_.sm_clocks_mhz, *mhz)) : std::nullopt;
}

void GpuTwin::lock_sm_clock(std::optional<double> mhz) {
  sm_lock_mhz_ = mhz ? std::optional<double>(nearest_clock_mhz(gpu_.sm_clocks_mhz, *mhz)) : std::nullopt;
}

void GpuTwin::lock_memory_clock(std::optional<double> mhz) {
  memory_lock_mhz_ = mhz ? std::optional<double>(nearest_clock_mhz(gpu_.memory_clocks_mhz, *mhz)) : std::nullopt;
}

void GpuTwin::set_power_limit(std::optional<double> watts) {
  if (watts && (*watts < gpu_.power_limit_min_w || *watts > gpu_.power_limit_max_w)) {
    throw Error(ErrorCode::internal, "twin: power limit outside the board range reached the twin");
  }
  power_limit_w_ = watts;
}

double GpuTwin::memory_clock_mhz() const { return memory_lock_mhz_.value_or(gpu_.default_memory_clock_mhz); }

double GpuTwin::requested_sm_clock_mhz() const {
  // Unlocked, the boost governor runs at its clock (the top boost clock unless told otherwise)
  // unless power limits it.
  return sm_lock_mhz_.value_or(governor_sm_clock_mhz());
}

void GpuTwin::emit(double duration_s, double power_w) {
  const double start_s = now_s_;
  now_s_ += duration_s;
  energy_j_ += power_w * duration_s;
  current_power_w_ = power_w;
  sensor_.add_segment(start_s, now_s_, power_w);
}

const GpuTwin::BatchModel& GpuTwin::batch_model(int batch_size, OperatingPoint requested) {
  const auto limit = power_limit_w_;
  const auto& last = last_batch_model_;
  if (last && last->batch_size == batch_size && last->requested.sm_clock_mhz == requested.sm_clock_mhz &&
      last->requested.memory_clock_mhz == requested.memory_clock_mhz && last->power_limit_w == limit) {
    return *last;
  }
  BatchModel m;
  m.batch_size = batch_size;
  m.requested = requested;
  m.power_limit_w = limit;
  const double sm_mhz = power_limited_sm_clock_mhz(gpu_, model_, precision_, batch_size, requested, power_limit_w());
  m.point = OperatingPoint{sm_mhz, requested.memory_clock_mhz};
  m.profile = profile_batch(gpu_, model_, precision_, batch_size, m.point);
  m.halves = busy_halves_w(gpu_, m.point, m.profile);
  m.prep_power_w = idle_loaded_power_w(gpu_, m.point);
  last_batch_model_ = m;
  return *last_batch_model_;
}

BatchRecord GpuTwin::run_batch(int batch_size) {
  if (batch_size < 1) throw Error(ErrorCode::internal, "twin: batch size must be >= 1");
  if (pipeline_.mode != PipelineMode::none && !(pipeline_.seconds_per_image >= 0.0)) {
    throw Error(ErrorCode::internal, "twin: host seconds per image must be >= 0");
  }
  restart_processes_if_partition_changed({});
  single_process_ran_ = true;
  const OperatingPoint requested{requested_sm_clock_mhz(), memory_clock_mhz()};
  const auto& model = batch_model(batch_size, requested);
  const double sm_mhz = model.point.sm_clock_mhz;
  const OperatingPoint point = model.point;
  auto profile = model.profile;
  // Kernel-time jitter (clock boost wobble, scheduling); clamped so a draw can never reverse time.
  const double jitter = std::clamp(1.0 + gpu_.latency_jitter_fraction * latency_noise_.gaussian(), 0.5, 1.5);
  profile.busy_s *= jitter;

  BatchRecord record;
  record.batch_size = batch_size;
  record.start_s = now_s_;
  record.sm_clock_mhz = sm_mhz;
  record.memory_clock_mhz = point.memory_clock_mhz;
  record.power_limited = sm_mhz < requested.sm_clock_mhz;
  record.prep_power_w = model.prep_power_w;
  // The halves' power depends on activity, not on the busy time the jitter scales.
  const auto halves = model.halves;
  record.busy_power_w = halves.mean_w();
  const bool first_shape = tuned_batch_sizes_.empty();
  double autotune_w = record.busy_power_w;
  if (autotune_new_shapes_ && tuned_batch_sizes_.insert(batch_size).second) {
    record.autotune_s = autotune_s(gpu_, profile);
    if (first_shape) autotune_w = first_autotune_power_w(gpu_, model_, precision_, point, model.profile);
  }
  const double host_s = pipeline_.seconds_per_batch + pipeline_.seconds_per_image * batch_size;
  switch (pipeline_.mode) {
    case PipelineMode::none:
      record.host_s = 0.0;
      break;
    case PipelineMode::serial:  // the CPU decodes the whole batch first; the GPU waits
      record.host_s = host_s;
      break;
    case PipelineMode::overlapped:  // decoding the next batch hides behind this batch's compute
      record.host_s = std::max(0.0, host_s - profile.busy_s);
      break;
  }
  if (spawned_sampler_) {
    // A process start stalls the host: all of the decode and input preparation it lands in, but
    // only the share of the busy phase that the kernel launches pace (the GPU runs on through
    // the kernels already queued; the P40 logs' batch-256 steps show next to no stretch on large
    // models). The autotuning is left unstalled, as the calibration's step model has it.
    const auto& sampler = *spawned_sampler_;
    const double host_work_s = record.host_s + profile.prep_s;
    const double host_stalled_s = sampler.stalled_duration_s(now_s_, host_work_s);
    const double share = sampler_stall_share(gpu_, model.profile, sampler);
    const double busy_stalled_s =
        sampler.stalled_duration_s(now_s_ + host_stalled_s + record.autotune_s, profile.busy_s, share);
    record.stall_s = (host_stalled_s - host_work_s) + (busy_stalled_s - profile.busy_s);
  }
  if (pipeline_.mode == PipelineMode::serial) emit(record.host_s, record.prep_power_w);
  // The batch waits, the GPU idle with the context loaded, while the sampler's processes hold it
  // (all at once: when exactly does not change the batch's length or energy).
  emit(record.stall_s, record.prep_power_w);
  emit(profile.prep_s, record.prep_power_w);
  emit(record.autotune_s, autotune_w);
  emit(profile.busy_s / 2.0, halves.first_w);
  emit(profile.busy_s / 2.0, halves.second_w);
  if (pipeline_.mode == PipelineMode::overlapped) emit(record.host_s, record.prep_power_w);
  record.end_s = now_s_;
  current_sm_mhz_ = sm_mhz;
  utilization_ = (profile.busy_s + record.autotune_s) / record.latency_s();
  return record;
}

const GpuTwin::MpsModel& GpuTwin::mps_model(const std::vector<MpsTenant>& tenants, OperatingPoint requested) {
  const auto limit = power_limit_w_;
  const auto& last = mps_model_;
  if (last && last->tenants == tenants && last->requested.sm_clock_mhz == requested.sm_clock_mhz &&
      last->requested.memory_clock_mhz == requested.memory_clock_mhz && last->power_limit_w == limit) {
    return *last;
  }
  MpsModel m;
  m.tenants = tenants;
  m.requested = requested;
  m.power_limit_w = limit;
  const double sm_mhz = mps_power_limited_sm_clock_mhz(gpu_, model_, precision_, tenants, requested, power_limit_w());
  m.point = OperatingPoint{sm_mhz, requested.memory_clock_mhz};
  m.profile = profile_mps(gpu_, model_, precision_, tenants, m.point);
  m.idle_w = idle_loaded_power_w(gpu_, m.point);
  for (const auto& tenant : m.profile.tenants) m.busy_w.push_back(mps_tenant_busy_power_w(gpu_, tenant, m.point));
  mps_model_ = std::move(m);
  return *mps_model_;
}

void GpuTwin::restart_processes_if_partition_changed(const std::vector<MpsTenant>& tenants) {
  const auto same_shares = [&] {
    if (tenants.size() != mps_tenants_.size()) return false;
    for (std::size_t i = 0; i < tenants.size(); ++i) {
      if (tenants[i].share_pct != mps_tenants_[i].share_pct) return false;
    }
    return true;
  };
  if (same_shares()) return;
  // Worker processes are restarted with their new shares (PctoDL restarts its MPS workers): the
  // GPU idles meanwhile and batches in flight are lost. The job's first processes start before it.
  const bool processes_were_running = !mps_tenants_.empty() || single_process_ran_;
  if (processes_were_running) idle(gpu_.mps_restart_s);
  in_flight_.clear();
  mps_tenants_.clear();
}

void GpuTwin::start_tenant_batch(std::size_t tenant, double start_s) {
  const auto& model = *mps_model_;
  const auto& profile = model.profile.tenants[tenant].batch;
  const double jitter = std::clamp(1.0 + gpu_.latency_jitter_fraction * latency_noise_.gaussian(), 0.5, 1.5);
  InFlight batch;
  batch.batch = model.tenants[tenant].batch;
  batch.start_s = start_s;
  batch.kernels_from_s = start_s + profile.prep_s;
  batch.end_s = batch.kernels_from_s + profile.busy_s * jitter;
  batch.busy_w = model.busy_w[tenant];
  if (tenant < in_flight_.size()) {
    in_flight_[tenant] = batch;
  } else {
    in_flight_.push_back(batch);
  }
}

void GpuTwin::advance_tenants_to(double end_s) {
  // Piecewise-constant power: it changes where a tenant's kernels start (or, at end_s, stop).
  while (now_s_ < end_s) {
    double next_s = end_s;
    double power_w = mps_model_->idle_w;
    for (const auto& batch : in_flight_) {
      if (batch.kernels_from_s <= now_s_) {
        power_w += batch.busy_w;
      } else {
        next_s = std::min(next_s, batch.kernels_from_s);
      }
    }
    emit(next_s - now_s_, power_w);
  }
}

BatchRecord GpuTwin::run_tenants(const std::vector<MpsTenant>& tenants) {
  check_mps_tenants(tenants);
  restart_processes_if_partition_changed(tenants);
  mps_tenants_ = tenants;
  const OperatingPoint requested{requested_sm_clock_mhz(), memory_clock_mhz()};
  const auto& model = mps_model(tenants, requested);
  for (std::size_t i = in_flight_.size(); i < tenants.size(); ++i) start_tenant_batch(i, now_s_);
  const auto first = std::min_element(in_flight_.begin(), in_flight_.end(),
                                      [](const InFlight& a, const InFlight& b) { return a.end_s < b.end_s; });
  const auto tenant = static_cast<std::size_t>(first - in_flight_.begin());
  const InFlight done = *first;
  advance_tenants_to(done.end_s);

  BatchRecord record;
  record.batch_size = done.batch;
  record.tenant = static_cast<int>(tenant);
  record.start_s = done.start_s;
  record.end_s = done.end_s;
  record.sm_clock_mhz = model.point.sm_clock_mhz;
  record.memory_clock_mhz = model.point.memory_clock_mhz;
  record.power_limited = model.point.sm_clock_mhz < requested.sm_clock_mhz;
  record.prep_power_w = model.idle_w;
  record.busy_power_w = model.idle_w + done.busy_w;
  current_sm_mhz_ = model.point.sm_clock_mhz;
  utilization_ = 0.0;
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    const auto& profile = model.profile.tenants[i].batch;
    utilization_ += tenants[i].share_pct / 100.0 * profile.busy_s / profile.latency_s();
  }
  start_tenant_batch(tenant, done.end_s);
  return record;
}

void GpuTwin::idle(double seconds) {
  if (seconds <= 0.0) return;
  current_sm_mhz_ = requested_sm_clock_mhz();
  utilization_ = 0.0;
  emit(seconds, idle_loaded_power_w(gpu_, OperatingPoint{current_sm_mhz_, memory_clock_mhz()}));
}

}  // namespace gpucap::sim
