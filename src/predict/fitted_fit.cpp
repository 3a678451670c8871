// Fitting gpucap's predictor (predict/fitted.hpp): the closed-form priors with Ceres (robust
// least squares, automatic derivatives, bounds), then dlib's kernel ridge regression on the
// priors' log residuals. Everything runs single-threaded in a fixed order, so the same rows give
// the same model.

#include <ceres/ceres.h>
#include <ceres/manifold.h>
#include <dlib/svm/kernel.h>
#include <dlib/svm/krr_trainer.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fitted_model.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/predict/fitted.hpp"

namespace gpucap::predict {

namespace {

struct FitRow {
  const ProfileRow* row = nullptr;
  std::vector<double> fractions;  // shares / 100
  double phi = 1.0;               // SM clock / f_ref
};

// ---------------------------------------------------------------------------------------------
// Ceres: one bounded parameter vector, robust residuals, deterministic settings.

struct Bound {
  double lo, hi;
};

template <typename AddResiduals>
double solve(std::vector<double>& x, const std::vector<Bound>& bounds, const std::vector<int>& constant,
             int max_iterations, AddResiduals add_residuals) {
  ceres::Problem::Options problem_options;
  problem_options.loss_function_ownership = ceres::DO_NOT_TAKE_OWNERSHIP;
  ceres::Problem problem(problem_options);
  add_residuals(problem, x.data());
  const int size = static_cast<int>(x.size());
  if (constant.size() == x.size()) return std::numeric_limits<double>::infinity();
  if (!constant.empty()) problem.SetManifold(x.data(), new ceres::SubsetManifold(size, constant));
  for (int i = 0; i < size; ++i) {
    const auto& b = bounds[static_cast<std::size_t>(i)];
    problem.SetParameterLowerBound(x.data(), i, b.lo);
    problem.SetParameterUpperBound(x.data(), i, b.hi);
  }
  ceres::Solver::Options solver;
  solver.minimizer_type = ceres::TRUST_REGION;
  solver.trust_region_strategy_type = ceres::LEVENBERG_MARQUARDT;
  solver.linear_solver_type = ceres::DENSE_QR;
  solver.max_num_iterations = max_iterations;
  solver.num_threads = 1;  // deterministic
  solver.logging_type = ceres::SILENT;
  solver.minimizer_progress_to_stdout = false;
  const auto start = x;
  ceres::Solver::Summary summary;
  ceres::Solve(solver, &problem, &summary);
  if (!summary.IsSolutionUsable() || !std::isfinite(summary.final_cost)) {
    x = start;
    return std::numeric_limits<double>::infinity();
  }
  return summary.final_cost;
}

// ---------------------------------------------------------------------------------------------
// Throughput prior. Parameters in log space except the interference and the clock-insensitive
// fraction (which may be 0).

enum ThroughputIndex {
  kWork,
  kOverhead,
  kFillBatch,
  kFillSharpness,
  kShareExponent,
  kBandwidth,
  kInterference,
  kClockExponent,
  kClockInsensitive,
  kTp
};

template <typename T>
detail::ThroughputParams<T> throughput_params(const T* x) {
  using std::exp;
  return {exp(x[kWork]),           exp(x[kOverhead]),  exp(x[kFillBatch]), exp(x[kFillSharpness]),
          exp(x[kShareExponent]), exp(x[kBandwidth]), x[kInterference],   exp(x[kClockExponent]),
          x[kClockInsensitive]};
}

struct ThroughputCost {
  const FitRow* r;
  template <typename T>
  bool operator()(const T* x, T* residual) const {
    using std::log;
    const auto prior =
        detail::throughput_prior(throughput_params(x), r->fractions.data(), r->row->batches.data(), r->fractions.size(), r->phi);
    residual[0] = log(prior.throughput) - std::log(r->row->throughput_img_s);
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// Power prior: static cubic and the two dynamic terms linear (non-negative), the clock exponent
// in log space.

enum PowerIndex { kS0, kS1, kS2, kS3, kSmDynamic, kPowerClockExponent, kMemoryDynamic, kPp };

template <typename T>
detail::PowerParams<T> power_params(const T* x) {
  using std::exp;
  return {{x[kS0], x[kS1], x[kS2], x[kS3]}, x[kSmDynamic], exp(x[kPowerClockExponent]), x[kMemoryDynamic]};
}

struct PowerCost {
  double phi, activity, traffic, power_w;
  template <typename T>
  bool operator()(const T* x, T* residual) const {
    residual[0] = (detail::power_prior(power_params(x), phi, activity, traffic) - power_w) / power_w;
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// Residual regressor: dlib's kernel ridge regression with a Gaussian kernel.

using Sample = dlib::matrix<double, static_cast<long>(detail::kFeatures), 1>;
using Kernel = dlib::radial_basis_kernel<Sample>;

// Kernel widths tried (features standardised); dlib's leave-one-out search picks the ridge for
// each, and the width with the lowest leave-one-out squared error is kept.
constexpr std::array<double, 6> kKernelWidths = {0.02, 0.05, 0.1, 0.2, 0.5, 1.0};

KernelRegressor train_residual(const std::vector<std::array<double, detail::kFeatures>>& x, const std::vector<double>& y,
                               std::size_t max_basis) {
  KernelRegressor r;
  const std::size_t n = x.size(), d = detail::kFeatures;
  r.mean.assign(d, 0.0);
  r.scale.assign(d, 1.0);
  for (std::size_t j = 0; j < d; ++j) {
    double sum = 0.0;
    for (const auto& v : x) sum += v[j];
    const double mean = sum / static_cast<double>(n);
    double ss = 0.0;
    for (const auto& v : x) ss += (v[j] - mean) * (v[j] - mean);
    const double sd = std::sqrt(ss / static_cast<double>(n));
    r.mean[j] = mean;
    r.scale[j] = sd > 1e-9 * (1.0 + std::abs(mean)) ? sd : 1.0;
  }
  std::vector<Sample> samples(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < d; ++j) samples[i](static_cast<long>(j)) = (x[i][j] - r.mean[j]) / r.scale[j];
  }
  double best = std::numeric_limits<double>::infinity();
  for (const double width : kKernelWidths) {
    dlib::krr_trainer<Kernel> trainer;
    trainer.set_kernel(Kernel(width));
    trainer.set_max_basis_size(static_cast<unsigned long>(max_basis));
    trainer.use_regression_loss_for_loo_cv();
    std::vector<double> loo;
    double lambda = 0.0;
    const auto df = trainer.train(samples, y, loo, lambda);
    double sse = 0.0;
    for (std::size_t i = 0; i < n; ++i) sse += (loo[i] - y[i]) * (loo[i] - y[i]);
    if (!(sse < best)) continue;
    best = sse;
    r.gamma = width;
    r.bias = df.b;
    r.lambda = lambda;
    r.alpha.assign(df.alpha.begin(), df.alpha.end());
    r.basis.clear();
    for (long i = 0; i < df.basis_vectors.size(); ++i) {
      for (long j = 0; j < static_cast<long>(d); ++j) r.basis.push_back(df.basis_vectors(i)(j));
    }
  }
  const auto [lo, hi] = std::minmax_element(y.begin(), y.end());
  const double margin = 0.05 + 0.1 * (*hi - *lo);
  r.lo = *lo - margin;
  r.hi = *hi + margin;
  return r;
}

// ---------------------------------------------------------------------------------------------
// One memory clock.

// The clock a row was asked to run at: the target when the profile has one (measured clocks
// jitter by a few MHz from row to row), else the measured one.
double nominal_clock_mhz(const ProfileRow& row) {
  return row.target_sm_clock_mhz > 0.0 ? row.target_sm_clock_mhz : row.clock_mhz();
}

std::size_t distinct_clocks(const std::vector<FitRow>& rows) {
  std::set<long long> clocks;  // 5-MHz bins
  for (const auto& r : rows) clocks.insert(std::llround(nominal_clock_mhz(*r.row) / 5.0));
  return clocks.size();
}

FittedClockModel fit_clock(const std::vector<FitRow>& rows, double memory_clock_mhz, double f_ref_mhz,
                           const FitOptions& options, std::vector<std::string>& notes) {
  FittedClockModel model;
  auto& c = model.prior;
  c.memory_clock_mhz = memory_clock_mhz;
  c.f_ref_mhz = f_ref_mhz;
  const std::size_t clocks = distinct_clocks(rows);
  std::size_t max_tenants = 0;
  for (const auto& r : rows) max_tenants = std::max(max_tenants, r.fractions.size());

  // --- Throughput ---
  double top = 0.0, top_any = 0.0;
  for (const auto& r : rows) {
    top_any = std::max(top_any, r.row->throughput_img_s);
    if (r.phi >= 0.97) top = std::max(top, r.row->throughput_img_s);
  }
  if (top <= 0.0) top = top_any;
  const double w0 = 1.0 / top;
  std::vector<Bound> tb(kTp);
  tb[kWork] = {std::log(1e-4 * w0), std::log(1e3 * w0)};
  tb[kOverhead] = {std::log(1e-7), std::log(10.0)};
  tb[kFillBatch] = {std::log(0.25), std::log(1e5)};
  tb[kFillSharpness] = {std::log(0.5), std::log(8.0)};
  tb[kShareExponent] = {std::log(0.2), std::log(2.0)};
  tb[kBandwidth] = {std::log(1e-6 * w0), std::log(10.0 * w0)};
  tb[kInterference] = {0.0, 1.0};
  tb[kClockExponent] = {std::log(0.05), std::log(2.5)};
  tb[kClockInsensitive] = {0.0, 0.95};
  std::vector<int> t_constant;
  if (clocks < 2) t_constant = {kClockExponent, kClockInsensitive};
  if (max_tenants < 2) t_constant.push_back(kInterference);
  std::vector<double> best_t;
  double best_cost = std::numeric_limits<double>::infinity();
  ceres::HuberLoss t_loss(0.1);
  // Two starts (short overhead and small fill batch; long and large): on every profile tried, the
  // four combinations reached the same minimum within 0.3 % of the cost.
  for (const auto& [overhead_images, fill_batch] : {std::pair{4.0, 16.0}, std::pair{32.0, 128.0}}) {
    std::vector<double> x(kTp);
    x[kWork] = std::log(w0);
    x[kOverhead] = std::log(overhead_images * w0);
    x[kFillBatch] = std::log(fill_batch);
    x[kFillSharpness] = std::log(2.0);
    x[kShareExponent] = 0.0;
    x[kBandwidth] = std::log(0.5 * w0);
    x[kInterference] = max_tenants < 2 ? 0.0 : 0.02;
    x[kClockExponent] = std::log(clocks < 2 ? 1.0 : 0.8);
    x[kClockInsensitive] = clocks < 2 ? 0.0 : 0.2;
    const double cost = solve(x, tb, t_constant, options.max_iterations, [&](ceres::Problem& p, double* data) {
      for (const auto& r : rows) {
        p.AddResidualBlock(new ceres::AutoDiffCostFunction<ThroughputCost, 1, kTp>(new ThroughputCost{&r}),
                           &t_loss, data);
      }
    });
    if (cost < best_cost) {
      best_cost = cost;
      best_t = x;
    }
  }
  if (best_t.empty()) {
    throw Error(ErrorCode::not_converged,
                fmt::format("the throughput prior at memory clock {:g} MHz could not be fitted", memory_clock_mhz));
  }
  const auto tq = throughput_params(best_t.data());
  c.work_s = tq.work_s;
  c.overhead_s = tq.overhead_s;
  c.fill_batch = tq.fill_batch;
  c.fill_sharpness = tq.fill_sharpness;
  c.share_exponent = tq.share_exponent;
  c.bandwidth_s = tq.bandwidth_s;
  c.interference = tq.interference;
  c.clock_exponent = tq.clock_exponent;
  c.clock_insensitive = tq.clock_insensitive;

  std::vector<detail::ThroughputPrior<double>> priors;
  for (const auto& r : rows) {
    priors.push_back(detail::throughput_prior(tq, r.fractions.data(), r.row->batches.data(), r.fractions.size(), r.phi));
  }

  // --- Power ---
  double p_min = std::numeric_limits<double>::infinity(), p_max = 0.0;
  for (const auto& r : rows) {
    p_min = std::min(p_min, r.row->power_max_w);
    p_max = std::max(p_max, r.row->power_max_w);
  }
  const double span_w = std::max(1.0, p_max - p_min);
  std::vector<Bound> pb(kPp);
  for (const int k : {kS0, kS1, kS2, kS3}) pb[static_cast<std::size_t>(k)] = {0.0, 10.0 * p_max};
  pb[kSmDynamic] = {0.0, 20.0 * p_max};
  pb[kPowerClockExponent] = {std::log(0.1), std::log(6.0)};
  pb[kMemoryDynamic] = {0.0, 20.0 * p_max};
  std::vector<int> p_constant;
  if (clocks < 2) p_constant = {kS1, kS2, kS3, kPowerClockExponent};
  else if (clocks < 4) p_constant = {kS2, kS3};
  std::vector<double> best_p;
  best_cost = std::numeric_limits<double>::infinity();
  ceres::HuberLoss p_loss(0.1);
  for (const double exponent : {1.0, 2.5}) {
    std::vector<double> x(kPp);
    x[kS0] = 0.5 * p_min;
    x[kS1] = clocks < 2 ? 0.0 : 0.1 * p_min;
    x[kS2] = clocks < 4 ? 0.0 : 0.05 * p_min;
    x[kS3] = clocks < 4 ? 0.0 : 0.05 * p_min;
    x[kSmDynamic] = 1.5 * span_w;
    x[kPowerClockExponent] = std::log(clocks < 2 ? 2.0 : exponent);
    x[kMemoryDynamic] = 0.1 * span_w;
    if (clocks < 2 && exponent != 1.0) break;  // the exponent is not fitted: one start
    const double cost = solve(x, pb, p_constant, options.max_iterations, [&](ceres::Problem& p, double* data) {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        p.AddResidualBlock(new ceres::AutoDiffCostFunction<PowerCost, 1, kPp>(new PowerCost{
                               rows[i].phi, priors[i].activity, priors[i].traffic, rows[i].row->power_max_w}),
                           &p_loss, data);
      }
    });
    if (cost < best_cost) {
      best_cost = cost;
      best_p = x;
    }
  }
  if (best_p.empty()) {
    throw Error(ErrorCode::not_converged,
                fmt::format("the power prior at memory clock {:g} MHz could not be fitted", memory_clock_mhz));
  }
  const auto pq = power_params(best_p.data());
  for (std::size_t k = 0; k < 4; ++k) c.static_w[k] = pq.static_w[k];
  c.sm_dynamic_w = pq.sm_dynamic_w;
  c.power_clock_exponent = pq.clock_exponent;
  c.memory_dynamic_w = pq.memory_dynamic_w;

  // --- Utilisation: measured ≈ scale × prior, least squares through the origin ---
  double sxy = 0.0, sxx = 0.0, mxy = 0.0, mxx = 0.0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = *rows[i].row;
    if (row.sm_util_pct > 0.0) {
      const double prior = 100.0 * priors[i].busy_union;
      sxy += prior * row.sm_util_pct;
      sxx += prior * prior;
    }
    if (row.mem_util_pct > 0.0) {
      const double prior = 100.0 * priors[i].traffic;
      mxy += prior * row.mem_util_pct;
      mxx += prior * prior;
    }
  }
  c.sm_util_scale = sxx > 0.0 && sxy > 0.0 ? sxy / sxx : 1.0;
  c.mem_util_scale = mxx > 0.0 && mxy > 0.0 ? mxy / mxx : 1.0;
  c.has_mem_util = mxx > 0.0 && mxy > 0.0;

  // --- Notes ---
  const auto at = fmt::format("memory clock {:g} MHz", memory_clock_mhz);
  if (clocks < 2) {
    notes.push_back(fmt::format("{}: one SM clock only: clock scaling is assumed (throughput exponent 1, power "
                                "exponent 2, constant static power), not fitted",
                                at));
  } else if (clocks < 4) {
    notes.push_back(fmt::format("{}: {} SM clocks only: static power is fitted as linear in the clock", at, clocks));
  }
  if (max_tenants < 2) notes.push_back(fmt::format("{}: single-tenant rows only: interference not fitted", at));
  if (sxx <= 0.0) notes.push_back(fmt::format("{}: no sm_util in the profile: u_sm is the unscaled prior", at));
  if (!c.has_mem_util) notes.push_back(fmt::format("{}: no mem_util in the profile: u_mem is not predicted", at));

  // --- Residual regressors ---
  if (options.residual_regressor) {
    std::vector<std::array<double, detail::kFeatures>> features;
    std::vector<double> throughput_residual, power_residual;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      features.push_back(
          detail::residual_features(r.fractions.data(), r.row->batches.data(), r.fractions.size(), r.phi, priors[i]));
      throughput_residual.push_back(std::log(r.row->throughput_img_s / priors[i].throughput));
      const double power = detail::power_prior(pq, r.phi, priors[i].activity, priors[i].traffic);
      power_residual.push_back(std::log(r.row->power_max_w / std::max(power, 1e-6)));
    }
    model.throughput_residual = train_residual(features, throughput_residual, options.max_basis_vectors);
    model.power_residual = train_residual(features, power_residual, options.max_basis_vectors);
  }
  return model;
}

// ---------------------------------------------------------------------------------------------
// Splitting and scoring.

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char ch : text) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ull;
  }
  return h;
}

std::string config_key(const ProfileRow& row) {
  std::string key;
  for (std::size_t i = 0; i < row.batches.size(); ++i) key += fmt::format("{:g}x{};", row.shares_pct[i], row.batches[i]);
  return key + fmt::format("f{:.0f}", nominal_clock_mhz(row));
}

// Every fifth configuration in hash order is held out; repeats of a configuration stay together.
void split(const std::vector<FitRow>& rows, std::vector<FitRow>& train, std::vector<FitRow>& held_out) {
  std::map<std::string, std::vector<std::size_t>> by_key;
  for (std::size_t i = 0; i < rows.size(); ++i) by_key[config_key(*rows[i].row)].push_back(i);
  std::vector<std::pair<std::uint64_t, std::string>> order;
  for (const auto& [key, indices] : by_key) order.emplace_back(fnv1a(key), key);
  std::sort(order.begin(), order.end());
  std::vector<bool> hold(rows.size(), false);
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k % 5 == 4) {
      for (const auto i : by_key[order[k].second]) hold[i] = true;
    }
  }
  for (std::size_t i = 0; i < rows.size(); ++i) (hold[i] ? held_out : train).push_back(rows[i]);
}

struct Scores {
  std::vector<double> measured, predicted;
  void add(double m, double p) {
    measured.push_back(m);
    predicted.push_back(p);
  }
  [[nodiscard]] Accuracy accuracy() const {
    Accuracy a;
    a.rows = measured.size();
    if (measured.empty()) {
      a.mape_pct = a.r2 = std::nan("");
      return a;
    }
    double ape = 0.0, mean = 0.0;
    for (std::size_t i = 0; i < measured.size(); ++i) {
      ape += std::abs(predicted[i] - measured[i]) / measured[i];
      mean += measured[i];
    }
    const double n = static_cast<double>(measured.size());
    mean /= n;
    double sse = 0.0, sst = 0.0;
    for (std::size_t i = 0; i < measured.size(); ++i) {
      sse += (predicted[i] - measured[i]) * (predicted[i] - measured[i]);
      sst += (measured[i] - mean) * (measured[i] - mean);
    }
    a.mape_pct = 100.0 * ape / n;
    a.r2 = sst > 0.0 ? 1.0 - sse / sst : std::nan("");
    return a;
  }
};

}  // namespace

FittedPredictor fit_predictor(const std::vector<ProfileRow>& rows, const FitOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  FitReport report;
  report.rows_read = rows.size();

  std::vector<std::string> models;  // in order of first appearance
  for (const auto& r : rows) {
    if (std::find(models.begin(), models.end(), r.model) == models.end()) models.push_back(r.model);
  }
  std::string model = options.model;
  if (model.empty()) {
    if (models.size() != 1) {
      throw usage_error(fmt::format("the profile holds {} models ({}): name the one to fit", models.size(),
                                    join(models, ", ")));
    }
    model = models.front();
  } else {
    const auto exact = std::find(models.begin(), models.end(), model);
    if (exact == models.end()) {
      const auto loose = std::find_if(models.begin(), models.end(),
                                      [&](const std::string& m) { return name_key(m) == name_key(model); });
      if (loose == models.end()) {
        throw usage_error(fmt::format("the profile has no rows of model '{}'; it holds: {}", model,
                                      models.empty() ? std::string("nothing") : join(models, ", ")));
      }
      model = *loose;
    }
  }
  report.model = model;
  for (const auto& m : models) {
    if (m != model) report.other_models.push_back(m);
  }

  std::map<long long, std::vector<FitRow>> groups;  // by memory clock, MHz
  std::map<long long, double> f_ref;
  for (const auto& r : rows) {
    if (r.model != model) {
      ++report.rows_other_models;
      continue;
    }
    if (r.oom()) {
      ++report.rows_oom;
      continue;
    }
    if (r.idle()) {
      ++report.rows_idle;
      continue;
    }
    FitRow fr;
    fr.row = &r;
    for (const double p : r.shares_pct) fr.fractions.push_back(p / 100.0);
    const auto m = std::llround(r.memory_clock_mhz);
    groups[m].push_back(std::move(fr));
    f_ref[m] = std::max(f_ref[m], r.clock_mhz());
    ++report.rows_used;
  }
  if (groups.empty()) {
    throw Error(ErrorCode::invalid_data,
                fmt::format("the profile has no usable rows of {} ({} out-of-memory, {} idle): nothing to fit", model,
                            report.rows_oom, report.rows_idle));
  }
  for (auto& [m, group] : groups) {
    if (group.size() < kMinFitRows) {
      throw Error(ErrorCode::invalid_data,
                  fmt::format("only {} usable rows of {} at memory clock {} MHz; at least {} are needed to fit the "
                              "predictor (better: a few hundred, as PctoDL's profiler writes)",
                              group.size(), model, m, kMinFitRows));
    }
    for (auto& fr : group) fr.phi = fr.row->clock_mhz() / f_ref[m];
  }

  const auto fit_all = [&](bool held_out_split, std::vector<std::vector<FitRow>>* held, std::vector<std::string>& notes) {
    FittedPredictor p;
    p.model_ = model;
    for (auto& [m, group] : groups) {
      std::vector<FitRow> train, test;
      if (held_out_split) {
        split(group, train, test);
      } else {
        train = group;
      }
      if (held != nullptr) held->push_back(test);
      p.clocks_.push_back(fit_clock(train, static_cast<double>(m), f_ref[m], options, notes));
    }
    return p;
  };

  // 80/20: the held-out accuracy of the procedure, with and without the residual regressor.
  std::vector<std::vector<FitRow>> held;
  std::vector<std::string> split_notes;
  const auto on_train = fit_all(true, &held, split_notes);
  Scores throughput, power, throughput_prior, power_prior;
  for (const auto& group : held) {
    report.rows_held_out += group.size();
    for (const auto& fr : group) {
      const auto& r = *fr.row;
      const auto p = on_train.predict(r.shares_pct, r.batches, r.clock_mhz(), r.memory_clock_mhz);
      throughput.add(r.throughput_img_s, p.throughput_img_s);
      power.add(r.power_max_w, p.power_w);
      throughput_prior.add(r.throughput_img_s, p.prior_throughput_img_s);
      power_prior.add(r.power_max_w, p.prior_power_w);
    }
  }
  report.rows_train = report.rows_used - report.rows_held_out;
  report.held_out_throughput = throughput.accuracy();
  report.held_out_power = power.accuracy();
  report.held_out_throughput_prior = throughput_prior.accuracy();
  report.held_out_power_prior = power_prior.accuracy();

  FittedPredictor result = options.refit_on_all_rows ? fit_all(false, nullptr, report.notes) : on_train;
  if (!options.refit_on_all_rows) report.notes = split_notes;
  Scores fitted_throughput, fitted_power;
  for (const auto& [m, group] : groups) {
    for (const auto& fr : group) {
      const auto& r = *fr.row;
      const auto p = result.predict(r.shares_pct, r.batches, r.clock_mhz(), r.memory_clock_mhz);
      fitted_throughput.add(r.throughput_img_s, p.throughput_img_s);
      fitted_power.add(r.power_max_w, p.power_w);
    }
  }
  report.fitted_throughput = fitted_throughput.accuracy();
  report.fitted_power = fitted_power.accuracy();
  report.fit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  result.report_ = std::move(report);
  return result;
}

}  // namespace gpucap::predict
