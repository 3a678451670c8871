#pragma once
// PctoDL's shadow optimizer (seed-systems.md §2.9): grey-box Bayesian optimisation of the MPS
// partition while a job runs. Two Gaussian processes learn the residuals of the partition
// predictor — measured minus predicted throughput, and measured window-max power minus predicted
// — over features of the partition and clocks; every few iterations it scores the partitions one
// move away by expected improvement of throughput over the current measurement times the
// probability that power stays under the cap, and proposes the best if its predicted gain clears
// a threshold. It changes shares and batch sizes only; the clocks stay with the DVFS controller.
//
// As upstream: Matérn-5/2 GPs with a 1e-3 noise term on standardised targets, refitted every 3
// updates on the last 300 points; candidates keep the tenant count (one share step moved to or
// from the largest tenant, or one tenant's batch up to 3 ladder steps either way), drop one (the
// two smallest merged, the larger batch kept) or add one (the largest split into ⌊half/step⌋·step
// and the rest); the adaptive threshold accepts predicted losses of up to 10 % early on. The
// features are scaled to the unit cube (f/2100 MHz, m/10000 MHz, N/K, b/256, shares/100), which
// upstream's normalisation leaves to the GP's length scales. Where upstream leaves a gap, the
// choice is documented at the member.

#include <cstddef>
#include <optional>
#include <vector>

#include "gpucap/tune/gp.hpp"
#include "gpucap/tune/partition.hpp"

namespace gpucap::tune {

// 1, 2, 4, 8, then 12 to 256 in steps of 4: the shadow optimizer's batch pool.
[[nodiscard]] std::vector<int> shadow_batch_pool();

struct ShadowParams {
  int mps_step_pct = 5;
  int max_batch = 256;
  std::vector<int> batch_pool = shadow_batch_pool();
  int batch_steps = 3;               // a batch moves up to this many ladder steps
  std::size_t history = 300;         // points kept for the GPs
  int refit_every = 3;               // updates between refits
  bool adaptive_threshold = true;
  double fixed_threshold = 0.003;    // used only when adaptive_threshold is off (upstream's CLI value)
  double adaptive_horizon = 1500.0;  // updates over which the adaptive threshold moves
  // K: features are zero-padded (or cut) to this many tenants; 0 = fixed at the first update to
  // that partition's tenant count + 1 (upstream fixes K at its first call).
  std::size_t max_tenants = 0;
};

struct ShadowPoint {
  std::vector<Tenant> tenants;
  double sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;
};

struct ShadowProposal {
  std::vector<Tenant> tenants;
  double expected_img_s = 0.0;  // prediction + learned residual
  double expected_w = 0.0;
  double score = 0.0;           // EI × P(under the cap)
  double threshold = 0.0;       // the gain it had to clear, as a fraction of the current throughput
};

class ShadowOptimizer {
 public:
  // Throws Error(usage) for a step that does not divide 100 or an empty batch pool.
  ShadowOptimizer(ShadowParams params, PartitionPredictor predict);

  // One measured iteration at `point`: its residuals join the history; every refit_every
  // updates the GPs are fitted again.
  void update(const ShadowPoint& point, double measured_img_s, double measured_max_w);
  // The best candidate one move from `current`, if the GPs are fitted and its expected gain over
  // `current_img_s` clears the threshold; nullopt otherwise.
  [[nodiscard]] std::optional<ShadowProposal> propose(const ShadowPoint& current, double current_img_s,
                                                      double cap_w) const;

  // The partitions one move away (each share a multiple of the step, adding up to at most 100).
  [[nodiscard]] std::vector<std::vector<Tenant>> candidates(const std::vector<Tenant>& current) const;
  // The gain a proposal must clear, as a fraction of the current throughput (negative early on:
  // predicted losses are accepted to explore).
  [[nodiscard]] double threshold() const;
  [[nodiscard]] std::size_t updates() const { return updates_; }
  [[nodiscard]] bool fitted() const { return throughput_gp_.has_value(); }

 private:
  [[nodiscard]] std::vector<double> features(const ShadowPoint& point) const;
  [[nodiscard]] std::vector<int> ladder(int share_pct) const;
  void refit();

  ShadowParams params_;
  PartitionPredictor predict_;
  std::vector<std::vector<double>> inputs_;
  std::vector<double> throughput_residuals_;
  std::vector<double> power_residuals_;
  std::size_t updates_ = 0;
  std::size_t feature_tenants_ = 0;  // K once fixed
  std::optional<GaussianProcess> throughput_gp_;
  std::optional<GaussianProcess> power_gp_;
};

}  // namespace gpucap::tune
