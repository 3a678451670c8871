#pragma once
// A port of the PctoDL performance/power predictor (wuooo339/PctoDL predict.py; specification
// in ../shared/data/pctodl/README.md and seed-systems.md §2.4): closed-form "physics" priors for
// SM and memory utilisation, four gradient-boosted ensembles, and clock scaling of throughput and
// power. It reads a parameter directory in the format of ../shared/data/pctodl (given at run
// time; those third-party fits are not part of gpucap's repository).
//
// The closed-form stage runs in float32 with the operation order of the original (torch float32
// modules); everything after it runs in double.

#include <span>
#include <string>
#include <vector>

#include "gpucap/predict/gbr.hpp"

namespace gpucap::predict {

struct PctodlClosedForm {
  // SM base demand per tenant: 100·tanh((λ·ln b + β) / max(p, 1)^γ)
  float sm_lambda = 0, sm_gamma = 0, sm_beta = 0;
  // Memory base demand: φ·clip(p/100)^α·tanh(λ·ln b + β)
  float mem_phi = 0, mem_alpha = 0, mem_lambda = 0, mem_beta = 0;
  // Memory system (N > 1)
  float k1 = 0, k2 = 0, sys_alpha = 0, sys_beta = 0, mu = 0, tau = 0;
  // Throughput
  double kappa_a = 0, kappa_b = 0, gamma_t = 0, t_start = 0, t_f_ref = 0, t_f_min = 0;
  bool batch_aware_kappa = true;
  // Power
  double delta3 = 0, delta2 = 0, delta1 = 0, delta0 = 0;
  double gamma_p = 0, p_base = 0, p_f_ref = 0, p_f_min = 0;
};

struct PctodlPrediction {
  double u_sm = 0.0;        // SM utilisation, percent (not clamped)
  double u_mem = 0.0;       // memory-controller utilisation, percent (not clamped)
  double throughput = 0.0;  // images per second, all tenants
  double power_w = 0.0;     // board power (fitted to the window maximum)
  // Intermediates, for checking a port stage by stage.
  std::vector<float> u_sm_base;
  std::vector<float> u_mem_base;
  double sm_prior = 0.0;
  double mem_prior = 0.0;
  double tp_prior = 0.0;
  double tp_ref = 0.0;
  double p_dyn_ref = 0.0;
  double p_static_w = 0.0;
};

struct PctodlAtClock {
  double throughput = 0.0;
  double power_w = 0.0;
  double p_static_w = 0.0;
};

class PctodlPredictor {
 public:
  // Loads DIR/params/<model>/<set>.json and DIR/gbr/<model>/<set>/*.json, where <set> is the
  // suffix without its leading underscore (e.g. "imagenet_mem5001"). Error(io/invalid_data)
  // naming the file; Error(usage) for an unknown model or parameter set (listing the known ones).
  [[nodiscard]] static PctodlPredictor load(const std::string& params_dir, const std::string& model,
                                            const std::string& param_set);

  // p: MPS share of each tenant in percent; b: batch size of each tenant; f: SM clock in MHz.
  // Throws Error(usage) if the lists are empty or of different lengths, or a batch is < 1.
  [[nodiscard]] PctodlPrediction predict(std::span<const double> p, std::span<const int> b, double f_mhz) const;
  // The same in two stages, for searches that try many SM clocks per partition (the vectorised
  // greedy): prepare() runs everything that does not depend on the clock — the closed forms and
  // all four boosted ensembles — and at_clock() only the clock scaling of throughput and power.
  // predict(p, b, f) == at_clock(prepare(p, b), f), bit for bit.
  [[nodiscard]] PctodlPrediction prepare(std::span<const double> p, std::span<const int> b) const;
  [[nodiscard]] PctodlPrediction at_clock(const PctodlPrediction& prepared, double f_mhz) const;
  // at_clock()'s clock-dependent figures alone (no copy of the prepared intermediates).
  [[nodiscard]] PctodlAtClock scale_to_clock(const PctodlPrediction& prepared, double f_mhz) const;

  [[nodiscard]] const std::string& model() const { return model_; }
  [[nodiscard]] const std::string& param_set() const { return param_set_; }
  [[nodiscard]] double memory_clock_mhz() const { return memory_clock_mhz_; }
  [[nodiscard]] const PctodlClosedForm& closed_form() const { return closed_form_; }

 private:
  std::string model_;
  std::string param_set_;
  double memory_clock_mhz_ = 0.0;
  PctodlClosedForm closed_form_;
  GradientBoostedTrees sm_;
  GradientBoostedTrees mem_;
  GradientBoostedTrees throughput_;
  GradientBoostedTrees power_dyn_;
};

// The parameter set PctoDL's benchmarks use for a GPU and memory clock: "imagenet_mem5001" or
// "imagenet_mem9501" on the RTX 3080 Ti (memory clock 5001 by default), "imagenet_a100_mem1215"
// on the A100. `gpu` is "3080ti" or "a100" (any spelling name_key() maps to those); memory_clock
// 0 means the default. Throws Error(usage) for other GPUs or memory clocks.
[[nodiscard]] std::string default_pctodl_param_set(const std::string& gpu, double memory_clock_mhz);

// Model names as the PctoDL export spells them ("mnasnet", "resnet50", ...), read from
// DIR/index.json; Error(io/invalid_data) if it cannot be read.
[[nodiscard]] std::vector<std::string> pctodl_models(const std::string& params_dir);

}  // namespace gpucap::predict
