#pragma once
// gpucap's own multi-tenant predictor, fitted by `gpucap fit` from profiles in PctoDL's profiler
// format (seed-systems.md §2.3): for tenants sharing one GPU through NVIDIA MPS (tenant i = MPS
// share p_i %, batch size b_i) at an SM clock f and a memory clock m, it predicts the total
// throughput, the board power (fitted to the window maximum, power_max) and the SM and memory
// utilisation.
//
// Two stages (docs/predictor.md has the equations):
//  1. closed-form priors with a physical meaning, fitted with Ceres (robust least squares):
//     per-batch latency = fixed overhead + compute time on the fraction of the GPU the tenant's
//     share and batch can fill, partly (1 − ρ) scaled by the clock as (f/f_ref)^γ; a shared memory-bandwidth
//     limit and a per-co-runner interference factor; power = static(f) (a cubic in f with
//     non-negative coefficients) + SM activity·(f/f_ref)^γp + memory traffic;
//  2. a residual regressor for throughput and power (the log of measured/prior): kernel ridge
//     regression with a Gaussian (RBF) kernel, trained with dlib's krr_trainer (its leave-one-out
//     search picks the ridge; a small grid over the kernel width picks the width by the same
//     criterion). The trained function Σ α_i·exp(−γ‖z − s_i‖²) − b is stored in gpucap's own
//     JSON and evaluated by gpucap, so a saved and loaded model predicts bit-for-bit as the fitted one.
//
// One set of parameters per memory clock in the profile; predicting at another memory clock is
// Error(usage).

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpucap/tune/partition.hpp"

namespace gpucap::predict {

// One row of a profile CSV (PctoDL's columns model_name, p_list, b_list, target_freq, mem_freq,
// sm_freq, sm_util, mem_util, throughput_total, power_avg, power_max).
struct ProfileRow {
  std::string model;
  std::vector<double> shares_pct;  // MPS share of each tenant, percent
  std::vector<int> batches;        // batch size of each tenant
  double target_sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;
  double sm_clock_mhz = 0.0;       // measured (mean); 0 when the profile has none
  double sm_util_pct = 0.0;
  double mem_util_pct = 0.0;
  double throughput_img_s = 0.0;   // all tenants
  double power_avg_w = 0.0;
  double power_max_w = 0.0;
  std::string source;              // "FILE:LINE", for messages

  // A configuration that did not run (PctoDL writes out-of-memory rows as zeros): no throughput.
  [[nodiscard]] bool oom() const { return throughput_img_s <= 0.0; }
  // No tenant: an idle-power row ("[]" lists).
  [[nodiscard]] bool idle() const { return shares_pct.empty(); }
  // The SM clock the row ran at: the measured one when the profile has it, else the target.
  [[nodiscard]] double clock_mhz() const { return sm_clock_mhz > 0.0 ? sm_clock_mhz : target_sm_clock_mhz; }
};

// Reads a profile CSV. The header names the columns (any order; extra columns are ignored);
// model_name, p_list, b_list, mem_freq, throughput_total, power_max and one of sm_freq/target_freq
// are required. Lists may be written "[50, 25]", "[50,25]" or "50;25" (quoted or not). Throws
// Error(io) if the file cannot be read and Error(invalid_data) "FILE:LINE: column NAME: ..." for a
// malformed field, p_list and b_list of different lengths, a share outside (0, 100] or shares
// adding up to more than 100 %, a batch < 1, a negative figure, a measured row (throughput > 0)
// without power or clock, or a file without data rows.
[[nodiscard]] std::vector<ProfileRow> read_profile_csv(const std::string& path);

struct FitOptions {
  // The model to fit; rows of other models are skipped. Empty: the profile's only model.
  std::string model;
  // Stage 2 (dlib kernel ridge regression on the priors' residuals); off: the priors alone.
  bool residual_regressor = true;
  // After measuring the held-out accuracy on an 80/20 split, fit the saved model again on every
  // row (the reported held-out figures are then those of the same procedure on 80 % of the rows).
  bool refit_on_all_rows = true;
  std::size_t max_basis_vectors = 96;  // per regressor: bounds the prediction time
  int max_iterations = 200;            // Ceres, per prior
};

// At least this many usable rows per memory clock.
inline constexpr std::size_t kMinFitRows = 20;

struct Accuracy {
  std::size_t rows = 0;
  double mape_pct = 0.0;  // mean absolute percentage error
  double r2 = 0.0;        // coefficient of determination (1 − SSE/SST)
};

struct FitReport {
  std::string model;
  std::size_t rows_read = 0;          // every row of every file
  std::size_t rows_other_models = 0;  // skipped
  std::size_t rows_oom = 0;           // skipped: zero throughput (out of memory, failed)
  std::size_t rows_idle = 0;          // skipped: no tenant
  std::size_t rows_used = 0;
  std::size_t rows_train = 0;         // of rows_used, by the deterministic 80/20 split
  std::size_t rows_held_out = 0;
  std::vector<std::string> other_models;
  // On the held-out 20 %: the full predictor and its closed-form priors alone.
  Accuracy held_out_throughput, held_out_power;
  Accuracy held_out_throughput_prior, held_out_power_prior;
  // The saved model on every row it was fitted on.
  Accuracy fitted_throughput, fitted_power;
  std::vector<std::string> notes;     // what could not be fitted from this profile, and why
  double fit_seconds = 0.0;           // wall time (not saved)
};

// Parameters of the closed-form priors at one memory clock (docs/predictor.md). φ = f / f_ref.
struct FittedClosedForm {
  double memory_clock_mhz = 0.0;
  double f_ref_mhz = 0.0;          // the highest SM clock in the profile at this memory clock
  // Throughput
  double work_s = 0.0;             // w: compute seconds per image on the whole GPU at f_ref
  double overhead_s = 0.0;         // t0: per-batch time that does not scale with the clock
  double fill_batch = 1.0;         // b_sat: the batch that fills the whole GPU
  double fill_sharpness = 2.0;     // n: smooth minimum of share and batch fill
  double share_exponent = 1.0;     // α: a share x fills x^α of the GPU (α < 1: diminishing returns)
  double bandwidth_s = 0.0;        // β: memory-bandwidth demand per img/s (1 = saturated)
  double interference = 0.0;       // κ: slowdown per co-running tenant
  double clock_exponent = 1.0;     // γ
  double clock_insensitive = 0.0;  // ρ: the part of the compute time that does not follow the clock
  // Power, W
  double static_w[4] = {0.0, 0.0, 0.0, 0.0};  // s0 + s1·φ + s2·φ² + s3·φ³
  double sm_dynamic_w = 0.0;       // k_sm: SM activity 1 at f_ref
  double power_clock_exponent = 2.0;  // γp
  double memory_dynamic_w = 0.0;   // k_mem: memory bandwidth saturated
  // Utilisation scales (measured ≈ scale × prior)
  double sm_util_scale = 1.0;
  double mem_util_scale = 1.0;
  bool has_mem_util = false;       // the profile had memory utilisation
};

// f(x) = Σ α_i·exp(−γ‖z − s_i‖²) − b with z_j = (x_j − mean_j) / scale_j, clamped to [lo, hi];
// dlib's decision_function<radial_basis_kernel> written out.
struct KernelRegressor {
  std::vector<double> mean, scale;  // per feature
  double gamma = 0.0;
  double bias = 0.0;
  double lambda = 0.0;              // the ridge dlib's leave-one-out search chose (informative)
  double lo = 0.0, hi = 0.0;
  std::vector<double> alpha;
  std::vector<double> basis;        // alpha.size() × features, row-major, standardised

  [[nodiscard]] bool empty() const { return alpha.empty(); }
  [[nodiscard]] double evaluate(std::span<const double> x) const;  // 0 when empty
};

struct FittedClockModel {
  FittedClosedForm prior;
  KernelRegressor throughput_residual;  // log(measured / prior)
  KernelRegressor power_residual;
};

struct FittedPrediction {
  double throughput_img_s = 0.0;
  double power_w = 0.0;             // window maximum
  double u_sm_pct = 0.0;            // in [0, 100]
  std::optional<double> u_mem_pct;  // when the profile had memory utilisation
  double prior_throughput_img_s = 0.0;  // stage 1 alone
  double prior_power_w = 0.0;
};

class FittedPredictor {
 public:
  // Reads a model written by save(); Error(io) or Error(invalid_data) naming the file.
  [[nodiscard]] static FittedPredictor load(const std::string& path);
  [[nodiscard]] static FittedPredictor from_json(const std::string& text, const std::string& source);
  // {"format":"gpucap-predictor","version":1, ...}; the same model gives the same bytes.
  [[nodiscard]] std::string to_json() const;
  // Writes atomically (temporary file + rename); Error(io) naming the file.
  void save(const std::string& path) const;

  // Error(usage) for empty or unequal lists, a share outside (0, 100] or a total over 100 %, a
  // batch < 1, a non-positive clock, or a memory clock that was not fitted (listing those that were).
  [[nodiscard]] FittedPrediction predict(std::span<const double> shares_pct, std::span<const int> batches,
                                         double sm_clock_mhz, double memory_clock_mhz) const;

  [[nodiscard]] const std::string& model() const { return model_; }
  [[nodiscard]] std::vector<double> memory_clocks_mhz() const;
  [[nodiscard]] const std::vector<FittedClockModel>& clock_models() const { return clocks_; }
  [[nodiscard]] const FitReport& report() const { return report_; }

 private:
  friend FittedPredictor fit_predictor(const std::vector<ProfileRow>& rows, const FitOptions& options);
  [[nodiscard]] const FittedClockModel& at_memory_clock(double memory_clock_mhz) const;

  std::string model_;
  std::vector<FittedClockModel> clocks_;  // ascending memory clock
  FitReport report_;
};

// Fits the predictor to the rows of options.model (or the only model). Error(usage) if no row is
// of that model (naming the models there are) or if several models are present and none was
// named; Error(invalid_data) if no row of it is usable or a memory clock has fewer than
// kMinFitRows usable rows; Error(not_converged) if Ceres finds no usable solution.
// Deterministic: the same rows and options give the same model (and the same JSON bytes).
[[nodiscard]] FittedPredictor fit_predictor(const std::vector<ProfileRow>& rows, const FitOptions& options = {});

// For the greedy and exhaustive partitioners (tune/partition.hpp); the predictor is copied.
[[nodiscard]] tune::PartitionPredictor as_partition_predictor(const FittedPredictor& predictor);

}  // namespace gpucap::predict
