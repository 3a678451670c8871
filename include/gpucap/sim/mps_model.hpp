#pragma once
// Several inference tenants on one GPU under NVIDIA MPS: the twin's steady-state model.
//
// Each tenant is a process that runs batches back to back on its MPS share of the SMs
// (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE). A tenant's batch is the single-tenant batch of
// perf_model.hpp on a slice of the GPU (GpuSlice):
//   compute  on `share` of the SMs, which a smaller batch already half-fills, slowed by
//            mps_interference_per_tenant for every other tenant (L2 and scheduler contention);
//   memory   the tenants share the bandwidth: when their demand exceeds what the GPU achieves,
//            every tenant's memory time stretches by one common factor, solved for here;
//   launch   each process launches its own kernels, so launch-bound models gain from tenants.
// Power is the single-tenant power law at the whole GPU's activity: while a tenant's kernels run
// it adds share × its slice's SM activity and its bandwidth share to the GPU's.
//
// Why several tenants can beat one: a small or launch-bound model leaves most SMs idle between
// kernels and during each batch's synchronisation; other processes fill those gaps.

#include <vector>

#include "gpucap/sim/perf_model.hpp"
#include "gpucap/sim/specs.hpp"

namespace gpucap::sim {

struct MpsTenant {
  double share_pct = 100.0;  // (0, 100]
  int batch = 1;             // >= 1

  bool operator==(const MpsTenant&) const = default;
};

struct MpsTenantProfile {
  BatchProfile batch;          // one batch of this tenant, co-running with the others
  double images_per_s = 0.0;
  // What this tenant adds to the whole GPU's activity while its kernels run.
  double sm_activity = 0.0;
  double memory_activity = 0.0;
};

struct MpsProfile {
  std::vector<MpsTenantProfile> tenants;
  double memory_stretch = 1.0;
  double throughput_img_s = 0.0;
  // Time-averaged over the tenants' cycles (power is linear in both).
  double sm_activity = 0.0;
  double memory_activity = 0.0;
};

// Throws Error(usage) for no tenants, a share outside (0, 100], shares adding up to more than
// 100 % or a batch < 1.
void check_mps_tenants(const std::vector<MpsTenant>& tenants);

[[nodiscard]] MpsProfile profile_mps(const GpuSpec& gpu, const ModelSpec& model, Precision precision,
                                     const std::vector<MpsTenant>& tenants, OperatingPoint point,
                                     bool copy_input = true);

// The time-averaged board power of the tenants running back to back.
[[nodiscard]] double mps_average_power_w(const GpuSpec& gpu, const MpsProfile& profile, OperatingPoint point);

// Power above idle that one tenant adds while its kernels run.
[[nodiscard]] double mps_tenant_busy_power_w(const GpuSpec& gpu, const MpsTenantProfile& tenant, OperatingPoint point);

// The SM clock the firmware settles on under a board power limit: the highest supported clock <=
// requested whose average power fits (the lowest clock if none does).
[[nodiscard]] double mps_power_limited_sm_clock_mhz(const GpuSpec& gpu, const ModelSpec& model, Precision precision,
                                                    const std::vector<MpsTenant>& tenants, OperatingPoint requested,
                                                    double power_limit_w);

}  // namespace gpucap::sim
