#pragma once
// PctoDL's greedy partitioner (seed-systems.md §2.7): which tenants to run on one GPU under NVIDIA
// MPS — each an MPS share and a batch size — and at which SM and memory clock, for the most
// predicted throughput under a power cap. Master Partition admits one tenant at a time, the one
// with the highest predicted throughput gain per share (FindBestNext), and after each admission
// the highest SM clock whose predicted power still fits the cap (SolveFreq: bracketing and
// bisection). An exhaustive search over every partition is here too, as the reference the greedy
// one is measured against. Both work on any predictor (PctoDL's fits, or one of gpucap's own).

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpucap::tune {

struct Tenant {
  int share_pct = 0;  // MPS active-thread percentage
  int batch = 0;

  bool operator==(const Tenant&) const = default;
};

struct PartitionPrediction {
  double throughput_img_s = 0.0;
  double power_w = 0.0;
};

// Predicts a set of tenants at an SM clock and a memory clock.
using PartitionPredictor =
    std::function<PartitionPrediction(const std::vector<Tenant>& tenants, double sm_clock_mhz, double memory_clock_mhz)>;

// A predictor split at the SM clock: for a set of tenants at a memory clock it does the work that
// does not depend on the SM clock once (PctoDL: the closed forms and all four boosted ensembles)
// and returns the prediction as a function of the SM clock alone.
using PartitionCurve = std::function<PartitionPrediction(double sm_clock_mhz)>;
using PartitionCurvePredictor =
    std::function<PartitionCurve(const std::vector<Tenant>& tenants, double memory_clock_mhz)>;

struct PartitionSpace {
  std::vector<double> sm_clocks_mhz;      // the GPU's supported SM clocks
  std::vector<double> memory_clocks_mhz;  // candidates (3080 Ti: 9501, 5001; A100: 1215)
  int mps_step_pct = 5;
  std::vector<int> batch_pool = {4, 8, 16, 32, 64, 96, 128, 192, 256};
  int max_batch = 256;                    // PctoDL caps vgg19 at 160
  double bisection_low_mhz = 500.0;       // SolveFreq's bounds
  double bisection_high_mhz = 2100.0;
  std::size_t max_tenants = 0;            // exhaustive search only: 0 = as many as the shares allow
  // Local search only: every tenant's batch stays within batches_for(its share). For a fitted
  // predictor, which is trustworthy only near what was profiled (a large share at a tiny batch
  // never is).
  bool admissible_batches_only = false;

  // Throws Error(usage) for an empty clock list, a step that does not divide 100, ...
  void validate() const;
  // The batch sizes a tenant of `share_pct` may take: the pool's within
  // [max(4, ⌊0.8·share⌋), ⌊6.4·share⌋] (at most max_batch); if none, the one closest to the lower end.
  [[nodiscard]] std::vector<int> batches_for(int share_pct) const;
};

struct Partition {
  std::vector<Tenant> tenants;  // in admission order
  double sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;
  PartitionPrediction predicted;
};

struct PartitionSearch {
  std::optional<Partition> best;      // nullopt: not even one tenant fits under the cap
  std::size_t predictor_calls = 0;    // distinct (tenants, SM clock, memory clock) predicted
  std::size_t configurations = 0;     // tenant sets whose clock was solved
  std::size_t curves = 0;             // vectorised: distinct (tenants, memory clock) prepared
};

// Master Partition + FindBestNext (§2.7), as upstream, including its quirks: the density
// (throughput gain per share) is not required to be positive, and leftover share is handed out in
// step-sized chunks round-robin before the clocks are solved once more. One deviation: SolveFreq
// accepts a bisection point only within 1 W *under* the cap (upstream: within 1 W either side,
// so its pick could exceed the cap by up to 1 W).
[[nodiscard]] PartitionSearch greedy_partition(const PartitionSpace& space, const PartitionPredictor& predict,
                                               double cap_w);

// Upstream's vectorised greedy (--greedy-vectorized, on in its benchmarks): the same search, with
// each candidate's clock-independent part evaluated once for all of SolveFreq's bisection steps
// (upstream batches the bisections of all candidates and their ensemble calls). Upstream snaps its
// result to a supported clock; this one does not, so it returns exactly greedy_partition's plan on
// the matching plain predictor (a test checks it), only faster.
[[nodiscard]] PartitionSearch greedy_partition_vectorised(const PartitionSpace& space,
                                                          const PartitionCurvePredictor& predict, double cap_w);

// Every multiset of tenants (shares in steps, adding up to at most 100; each share's admissible
// batches) at every memory clock, each at the SM clock SolveFreq finds over the whole range: the
// best predicted throughput under the cap. Tenants are ordered by share, then batch, descending.
[[nodiscard]] PartitionSearch exhaustive_partition(const PartitionSpace& space, const PartitionPredictor& predict,
                                                   double cap_w);

// gpucap's partitioner: seeds of 1 to 4 equal tenants at every admissible batch size, each at the
// best memory clock and the SM clock SolveFreq finds over the whole range; then hill climbing over
// single moves (a batch one pool step up or down, one share step moved between tenants or taken
// from the free share, two tenants merged, one split) while a move raises the predicted
// throughput. Upstream's per-share density favours many small tenants whose interference it
// never weighs; this search compares whole partitions (docs/algorithms.md). With
// space.admissible_batches_only, a partition with a batch outside its share's range is skipped.
[[nodiscard]] PartitionSearch local_search_partition(const PartitionSpace& space, const PartitionPredictor& predict,
                                                     double cap_w);

[[nodiscard]] std::string describe(const std::vector<Tenant>& tenants);

}  // namespace gpucap::tune
