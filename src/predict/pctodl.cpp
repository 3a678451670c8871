#include "gpucap/predict/pctodl.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::predict {

namespace fs = std::filesystem;

namespace {

// Workload constants predict.py uses for every model (its model_table.csv is not published).
constexpr double kGflops = 1000.0;
constexpr double kParamsM = 25.0;

float as_float(const JsonFields& fields, std::string_view key) { return static_cast<float>(fields.number(key)); }

// torch.nn.functional.softplus(x, beta=1, threshold=20) in float32.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

PctodlClosedForm parse_closed_form(const std::string& path) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  if (f.string("format") != "pctodl-closed-form/1") throw f.error("format", "expected \"pctodl-closed-form/1\"");
  PctodlClosedForm c;
  const auto sm = f.object("sm_base").object("raw");
  c.sm_lambda = std::fabs(as_float(sm, "raw_lambda_sm"));
  c.sm_gamma = std::fabs(as_float(sm, "raw_gamma_sm"));
  c.sm_beta = as_float(sm, "raw_beta_sm");
  const auto mem = f.object("mem_base").object("raw");
  c.mem_phi = softplus(as_float(mem, "raw_phi_mem"));
  c.mem_alpha = std::fabs(as_float(mem, "raw_alpha_mem"));
  c.mem_lambda = std::fabs(as_float(mem, "raw_lambda_mem"));
  c.mem_beta = as_float(mem, "raw_beta_mem");
  const auto sys = f.object("mem_system").object("raw");
  c.k1 = std::fabs(as_float(sys, "raw_k1"));
  c.k2 = std::fabs(as_float(sys, "raw_k2"));
  c.sys_alpha = std::fabs(as_float(sys, "raw_alpha"));
  c.sys_beta = std::fabs(as_float(sys, "raw_beta"));
  c.mu = std::fabs(as_float(sys, "raw_mu"));
  c.tau = std::fabs(as_float(sys, "raw_tau"));
  const auto tp = f.object("throughput").object("effective");
  c.kappa_a = tp.number("kappa_a");
  c.kappa_b = tp.number("kappa_b");
  const auto& aware = tp.at("batch_aware_kappa");
  if (!aware.is_boolean()) throw tp.error("batch_aware_kappa", "must be true or false");
  c.batch_aware_kappa = aware.get<bool>();
  c.gamma_t = tp.number("gamma_t");
  c.t_start = tp.number("T_start");
  c.t_f_ref = tp.number("f_ref");
  c.t_f_min = tp.number("f_min");
  const auto power = f.object("power").object("effective");
  const auto st = power.object("static");
  c.delta3 = st.number("delta_3");
  c.delta2 = st.number("delta_2");
  c.delta1 = st.number("delta_1");
  c.delta0 = st.number("delta_0");
  const auto dyn = power.object("dynamic");
  c.gamma_p = dyn.number("gamma_p");
  c.p_base = dyn.number("P_base");
  c.p_f_ref = dyn.number("f_ref");
  c.p_f_min = dyn.number("f_min");
  if (!(c.t_f_ref > c.t_f_min) || !(c.p_f_ref > c.p_f_min)) throw f.error("f_ref", "must be greater than f_min");
  return c;
}

float sm_base(const PctodlClosedForm& c, double p, int b) {
  const float log_b = std::log(static_cast<float>(b) + 1e-8f);
  const float t1 = c.sm_lambda * log_b;
  const float t2 = t1 + c.sm_beta;
  const float t3 = std::pow(std::max(static_cast<float>(p), 1.0f), c.sm_gamma);
  const float t4 = t2 / t3;
  return 100.0f * std::tanh(t4);
}

float mem_base(const PctodlClosedForm& c, double p, int b) {
  const float rn = std::min(std::max(static_cast<float>(p) / 100.0f, 1e-6f), 1.0f);
  const float cap = c.mem_phi * std::pow(rn, c.mem_alpha);
  const float s = std::tanh(c.mem_lambda * std::log(static_cast<float>(b) + 1e-8f) + c.mem_beta);
  return cap * s;
}

float mem_system(const PctodlClosedForm& c, const std::vector<float>& u_mem, std::span<const double> p,
                 std::span<const int> b) {
  float su = 0.0f, sp = 0.0f, sb = 0.0f;
  for (std::size_t i = 0; i < u_mem.size(); ++i) {
    su += u_mem[i];
    sp += static_cast<float>(p[i]);
    sb += static_cast<float>(b[i]);
  }
  const float n = static_cast<float>(u_mem.size());
  const float d = n + 1e-6f;  // as in predict.py: not exactly N
  const float avg = su / d;
  const float pbar = sp / d;
  const float bbar = sb / d;
  const float c_term = (c.k1 * c.tau + c.k2) - c.sys_alpha * (1.0f - std::exp(-c.sys_beta * c.tau));
  const float k = bbar <= c.tau ? c.k1 * bbar + c.k2
                                : (c.sys_alpha * (1.0f - std::exp(-c.sys_beta * bbar)) + c.mu * (bbar - c.tau)) + c_term;
  return avg + (pbar * k) * (n - 1.0f);
}

double mean(std::span<const double> v) {
  double s = 0.0;
  for (const double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double population_variance(std::span<const double> v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double s = 0.0;
  for (const double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size());
}

double clamp01(double x) { return std::clamp(x, 0.0, 1.0); }

}  // namespace

std::vector<std::string> pctodl_models(const std::string& params_dir) {
  const auto path = (fs::path(params_dir) / "index.json").string();
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  const auto models = f.strings_or_empty("models");
  if (models.empty()) throw f.error("models", "must list at least one model");
  return models;
}

PctodlPredictor PctodlPredictor::load(const std::string& params_dir, const std::string& model,
                                      const std::string& param_set) {
  const auto models = pctodl_models(params_dir);
  const auto known = std::find(models.begin(), models.end(), model);
  if (known == models.end()) {
    throw usage_error(fmt::format("no PctoDL fit for model '{}'; known: {}", model, join(models, ", ")));
  }
  const std::string set = param_set.rfind('_', 0) == 0 ? param_set.substr(1) : param_set;
  const auto params_path = fs::path(params_dir) / "params" / model / (set + ".json");
  std::error_code ec;
  if (!fs::exists(params_path, ec)) {
    std::vector<std::string> sets;
    for (const auto& entry : fs::directory_iterator(fs::path(params_dir) / "params" / model, ec)) {
      if (entry.path().extension() == ".json") sets.push_back(entry.path().stem().string());
    }
    std::sort(sets.begin(), sets.end());
    throw usage_error(fmt::format("no PctoDL parameter set '{}' for {}; available: {}", set, model, join(sets, ", ")));
  }
  PctodlPredictor predictor;
  predictor.model_ = model;
  predictor.param_set_ = set;
  predictor.closed_form_ = parse_closed_form(params_path.string());
  {
    const auto json = load_json_file(params_path.string());
    predictor.memory_clock_mhz_ = JsonFields(json, params_path.string()).positive("mem_clock_mhz");
  }
  const auto gbr_dir = fs::path(params_dir) / "gbr" / model / set;
  predictor.sm_ = load_gradient_boosted_trees((gbr_dir / "sm_gbr.json").string());
  predictor.mem_ = load_gradient_boosted_trees((gbr_dir / "mem_gbr.json").string());
  predictor.throughput_ = load_gradient_boosted_trees((gbr_dir / "throughput_gbr.json").string());
  predictor.power_dyn_ = load_gradient_boosted_trees((gbr_dir / "power_dyn_gbr.json").string());
  const auto expect = [&](const GradientBoostedTrees& trees, std::size_t n, const char* name) {
    if (trees.n_features != n) {
      throw Error(ErrorCode::invalid_data, fmt::format("{}: {} ensemble has {} features, expected {}",
                                                       gbr_dir.string(), name, trees.n_features, n));
    }
  };
  expect(predictor.sm_, 13, "sm");
  expect(predictor.mem_, 11, "mem");
  expect(predictor.throughput_, 14, "throughput");
  expect(predictor.power_dyn_, 8, "power_dyn");
  return predictor;
}

PctodlPrediction PctodlPredictor::predict(std::span<const double> p, std::span<const int> b, double f_mhz) const {
  return at_clock(prepare(p, b), f_mhz);
}

PctodlPrediction PctodlPredictor::prepare(std::span<const double> p, std::span<const int> b) const {
  if (p.empty() || p.size() != b.size()) {
    throw usage_error(fmt::format("need one MPS share per batch size (got {} shares, {} batch sizes)", p.size(),
                                  b.size()));
  }
  for (const int batch : b) {
    if (batch < 1) throw usage_error(fmt::format("batch size {} must be >= 1", batch));
  }
  const auto& c = closed_form_;
  const auto n_tasks = p.size();
  const double n = static_cast<double>(n_tasks);
  PctodlPrediction out;

  // Closed-form stage (float32).
  for (std::size_t i = 0; i < n_tasks; ++i) {
    out.u_sm_base.push_back(sm_base(c, p[i], b[i]));
    out.u_mem_base.push_back(mem_base(c, p[i], b[i]));
  }
  double sum_u_sm = 0.0, sum_u_mem = 0.0;
  for (std::size_t i = 0; i < n_tasks; ++i) {
    sum_u_sm += static_cast<double>(out.u_sm_base[i]);
    sum_u_mem += static_cast<double>(out.u_mem_base[i]);
  }
  out.sm_prior = sum_u_sm;
  out.mem_prior =
      n_tasks == 1 ? static_cast<double>(out.u_mem_base[0]) : static_cast<double>(mem_system(c, out.u_mem_base, p, b));

  // Features (double).
  std::vector<double> batches(b.begin(), b.end());
  const double var_p = population_variance(p);
  const double var_b = population_variance(batches);
  const double mean_b = mean(batches);
  const double mean_p = mean(p);
  double sum_b = 0.0, sum_p = 0.0;
  for (std::size_t i = 0; i < n_tasks; ++i) {
    sum_b += batches[i];
    sum_p += p[i];
  }
  const double mem10k = memory_clock_mhz_ / 10000.0;
  const double gf = kGflops / 1000.0;
  const double pm = kParamsM / 100.0;
  const double gf_per_param = kGflops / (kParamsM + 1.0);

  const double sm_features[] = {out.sm_prior, sum_u_sm, n, var_p, var_b, mean_b, sum_b, mean_p, sum_p,
                                mem10k, gf, pm, gf_per_param};
  out.u_sm = sm_.predict(sm_features);
  const double mem_features[] = {out.mem_prior, sum_u_mem, n, var_p, var_b, mean_b, sum_b, mem10k, gf, pm,
                                 gf_per_param};
  out.u_mem = mem_.predict(mem_features);

  // Throughput.
  const double kappa = c.batch_aware_kappa ? c.kappa_a * std::log(mean_b + 1e-8) + c.kappa_b : c.kappa_b;
  out.tp_prior = kappa * out.u_mem;
  const double tp_features[] = {out.tp_prior, out.u_mem, n, mem10k, gf, pm, gf_per_param,
                                batches[0],   sum_b,     mean_b, p[0], sum_p, mean_p, var_p};
  out.tp_ref = throughput_.predict(tp_features);
  const double power_features[] = {out.u_sm, out.u_mem, n, kParamsM * n, mean_p, var_p, mean_b, mem10k};
  out.p_dyn_ref = power_dyn_.predict(power_features);
  return out;
}

PctodlAtClock PctodlPredictor::scale_to_clock(const PctodlPrediction& prepared, double f_mhz) const {
  const auto& c = closed_form_;
  PctodlAtClock out;
  const double x = clamp01((f_mhz - c.t_f_min) / (c.t_f_ref - c.t_f_min));
  out.throughput = c.t_start < prepared.tp_ref * 0.2
                       ? prepared.tp_ref * std::pow(x, c.gamma_t * 0.5)
                       : c.t_start + (prepared.tp_ref - c.t_start) * std::pow(x, c.gamma_t);
  // Power.
  const double xp = clamp01((f_mhz - c.p_f_min) / (c.p_f_ref - c.p_f_min));
  const double p_dyn = c.p_base + (prepared.p_dyn_ref - c.p_base) * std::pow(xp, c.gamma_p);
  out.p_static_w = ((c.delta3 * std::pow(f_mhz, 3) + c.delta2 * std::pow(f_mhz, 2)) + c.delta1 * f_mhz) + c.delta0;
  out.power_w = out.p_static_w + p_dyn;
  return out;
}

PctodlPrediction PctodlPredictor::at_clock(const PctodlPrediction& prepared, double f_mhz) const {
  PctodlPrediction out = prepared;
  const auto scaled = scale_to_clock(prepared, f_mhz);
  out.throughput = scaled.throughput;
  out.p_static_w = scaled.p_static_w;
  out.power_w = scaled.power_w;
  return out;
}

std::string default_pctodl_param_set(const std::string& gpu, double memory_clock_mhz) {
  const auto key = name_key(gpu);
  if (key == "3080ti" || key == "rtx3080ti") {
    if (memory_clock_mhz == 0.0 || memory_clock_mhz == 5001.0) return "imagenet_mem5001";
    if (memory_clock_mhz == 9501.0) return "imagenet_mem9501";
    throw usage_error(fmt::format("PctoDL fits the RTX 3080 Ti at memory clocks 5001 and 9501 MHz, not {:g}",
                                  memory_clock_mhz));
  }
  if (key == "a100") {
    if (memory_clock_mhz == 0.0 || memory_clock_mhz == 1215.0) return "imagenet_a100_mem1215";
    throw usage_error(fmt::format("PctoDL fits the A100 at memory clock 1215 MHz, not {:g}", memory_clock_mhz));
  }
  throw usage_error(fmt::format("PctoDL has fits for the RTX 3080 Ti and the A100, not '{}'", gpu));
}

}  // namespace gpucap::predict
