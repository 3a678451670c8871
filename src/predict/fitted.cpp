// gpucap's fitted predictor: prediction, the model file, the partitioner adapter. The fit itself
// is in fitted_fit.cpp, the profile reader in fitted_csv.cpp.

#include "gpucap/predict/fitted.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "fitted_model.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::predict {

namespace {

constexpr const char* kFormat = "gpucap-predictor";
constexpr int kVersion = 1;
constexpr std::size_t kMaxTenants = 128;  // MPS itself allows 48 clients per GPU (60 on newer drivers)
constexpr double kMemoryClockTolerance = 0.5;

// Names of detail::residual_features, stored in the model file and checked when it is read.
const std::array<const char*, detail::kFeatures> kFeatureNames = {
    "clock_ratio", "tenants", "total_share", "max_share", "min_share",
    "mean_log2_batch", "max_log2_batch", "min_log2_batch", "bandwidth_demand", "sm_activity"};

std::string clock_list(const std::vector<double>& clocks) {
  std::vector<std::string> parts;
  for (const double m : clocks) parts.push_back(fmt::format("{:g}", m));
  return join(parts, ", ");
}

nlohmann::json finite_or_null(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(); }

nlohmann::json accuracy_json(const Accuracy& a) {
  return {{"rows", a.rows}, {"mape_pct", finite_or_null(a.mape_pct)}, {"r2", finite_or_null(a.r2)}};
}

nlohmann::json regressor_json(const KernelRegressor& r) {
  if (r.empty()) return nullptr;
  const std::size_t d = r.mean.size();
  auto basis = nlohmann::json::array();
  for (std::size_t i = 0; i < r.alpha.size(); ++i) {
    basis.push_back(std::vector<double>(r.basis.begin() + static_cast<std::ptrdiff_t>(i * d),
                                        r.basis.begin() + static_cast<std::ptrdiff_t>((i + 1) * d)));
  }
  return {{"kind", "rbf-kernel-ridge"},
          {"trainer", "dlib::krr_trainer<radial_basis_kernel>"},
          {"features", std::vector<std::string>(kFeatureNames.begin(), kFeatureNames.end())},
          {"mean", r.mean},
          {"scale", r.scale},
          {"gamma", r.gamma},
          {"bias", r.bias},
          {"lambda", r.lambda},
          {"clamp", {r.lo, r.hi}},
          {"alpha", r.alpha},
          {"basis", basis}};
}

double finite_number(const nlohmann::json& value, const JsonFields& at, std::string_view key) {
  if (!value.is_number() || !std::isfinite(value.get<double>())) throw at.error(key, "must contain only numbers");
  return value.get<double>();
}

std::vector<double> number_array(const JsonFields& f, std::string_view key, std::size_t size) {
  const auto& value = f.at(key);
  if (!value.is_array() || value.size() != size) throw f.error(key, fmt::format("must be an array of {} numbers", size));
  std::vector<double> out;
  for (const auto& item : value) out.push_back(finite_number(item, f, key));
  return out;
}

KernelRegressor parse_regressor(const JsonFields& parent, std::string_view key) {
  KernelRegressor r;
  if (!parent.has(key) || parent.at(key).is_null()) return r;
  const auto f = parent.object(key);
  if (f.string("kind") != "rbf-kernel-ridge") throw f.error("kind", "expected \"rbf-kernel-ridge\"");
  const auto names = f.strings_or_empty("features");
  if (names != std::vector<std::string>(kFeatureNames.begin(), kFeatureNames.end())) {
    throw f.error("features", fmt::format("expected [{}] (a model of another gpucap version?)",
                                          join(std::vector<std::string>(kFeatureNames.begin(), kFeatureNames.end()), ", ")));
  }
  const std::size_t d = kFeatureNames.size();
  r.mean = number_array(f, "mean", d);
  r.scale = number_array(f, "scale", d);
  for (const double s : r.scale) {
    if (!(s > 0.0)) throw f.error("scale", "must be positive");
  }
  r.gamma = f.positive("gamma");
  r.bias = f.number("bias");
  r.lambda = f.non_negative("lambda");
  const auto clamp = number_array(f, "clamp", 2);
  r.lo = clamp[0];
  r.hi = clamp[1];
  if (!(r.lo <= r.hi)) throw f.error("clamp", "must be [low, high] with low <= high");
  const auto alpha = f.numbers("alpha");
  r.alpha = alpha;
  const auto& basis = f.at("basis");
  if (!basis.is_array() || basis.size() != r.alpha.size()) {
    throw f.error("basis", fmt::format("must hold one vector per alpha ({})", r.alpha.size()));
  }
  for (const auto& row : basis) {
    if (!row.is_array() || row.size() != d) throw f.error("basis", fmt::format("each vector must have {} numbers", d));
    for (const auto& item : row) r.basis.push_back(finite_number(item, f, "basis"));
  }
  return r;
}

Accuracy parse_accuracy(const JsonFields& parent, std::string_view key) {
  Accuracy a;
  if (!parent.has(key)) return a;
  const auto f = parent.object(key);
  const auto rows = f.integer("rows");
  if (rows < 0) throw f.error("rows", "must be >= 0");
  a.rows = static_cast<std::size_t>(rows);
  a.mape_pct = f.at("mape_pct").is_null() ? std::nan("") : f.number("mape_pct");
  a.r2 = f.at("r2").is_null() ? std::nan("") : f.number("r2");
  return a;
}

std::size_t count(const JsonFields& f, std::string_view key) {
  const auto value = f.integer(key);
  if (value < 0) throw f.error(key, "must be >= 0");
  return static_cast<std::size_t>(value);
}

void check_tenants(std::span<const double> shares_pct, std::span<const int> batches) {
  if (shares_pct.empty()) throw usage_error("a prediction needs at least one tenant");
  if (shares_pct.size() != batches.size()) {
    throw usage_error(fmt::format("{} MPS shares but {} batch sizes", shares_pct.size(), batches.size()));
  }
  if (shares_pct.size() > kMaxTenants) {
    throw usage_error(fmt::format("{} tenants: at most {} are supported", shares_pct.size(), kMaxTenants));
  }
  double total = 0.0;
  for (const double p : shares_pct) {
    if (!(p > 0.0 && p <= 100.0)) throw usage_error(fmt::format("MPS share {:g} % must be in (0, 100]", p));
    total += p;
  }
  if (total > 100.0 + 1e-9) throw usage_error(fmt::format("MPS shares add up to {:g} %, more than 100 %", total));
  for (const int b : batches) {
    if (b < 1) throw usage_error(fmt::format("batch size {} must be at least 1", b));
  }
}

}  // namespace

double KernelRegressor::evaluate(std::span<const double> x) const {
  if (alpha.empty()) return 0.0;
  const std::size_t d = mean.size();
  std::array<double, detail::kFeatures> z{};
  for (std::size_t j = 0; j < d; ++j) z[j] = (x[j] - mean[j]) / scale[j];
  double sum = 0.0;
  const double* s = basis.data();
  for (std::size_t i = 0; i < alpha.size(); ++i, s += d) {
    double distance = 0.0;
    for (std::size_t j = 0; j < d; ++j) {
      const double diff = z[j] - s[j];
      distance += diff * diff;
    }
    sum += alpha[i] * std::exp(-gamma * distance);
  }
  return std::clamp(sum - bias, lo, hi);
}

std::vector<double> FittedPredictor::memory_clocks_mhz() const {
  std::vector<double> clocks;
  for (const auto& c : clocks_) clocks.push_back(c.prior.memory_clock_mhz);
  return clocks;
}

const FittedClockModel& FittedPredictor::at_memory_clock(double memory_clock_mhz) const {
  for (const auto& c : clocks_) {
    if (std::abs(c.prior.memory_clock_mhz - memory_clock_mhz) <= kMemoryClockTolerance) return c;
  }
  throw usage_error(fmt::format("the fitted predictor of {} has no fit for memory clock {:g} MHz; fitted: {} MHz", model_,
                                memory_clock_mhz, clock_list(memory_clocks_mhz())));
}

FittedPrediction FittedPredictor::predict(std::span<const double> shares_pct, std::span<const int> batches,
                                          double sm_clock_mhz, double memory_clock_mhz) const {
  check_tenants(shares_pct, batches);
  if (!(std::isfinite(sm_clock_mhz) && sm_clock_mhz > 0.0)) {
    throw usage_error(fmt::format("SM clock {:g} MHz must be positive", sm_clock_mhz));
  }
  const auto& model = at_memory_clock(memory_clock_mhz);
  const auto& c = model.prior;
  std::array<double, kMaxTenants> fractions{};
  for (std::size_t i = 0; i < shares_pct.size(); ++i) fractions[i] = shares_pct[i] / 100.0;
  const double phi = sm_clock_mhz / c.f_ref_mhz;
  const detail::ThroughputParams<double> tq{c.work_s,         c.overhead_s,     c.fill_batch,
                                            c.fill_sharpness, c.share_exponent, c.bandwidth_s,
                                            c.interference,   c.clock_exponent, c.clock_insensitive};
  const auto prior = detail::throughput_prior(tq, fractions.data(), batches.data(), batches.size(), phi);
  const detail::PowerParams<double> pq{{c.static_w[0], c.static_w[1], c.static_w[2], c.static_w[3]},
                                       c.sm_dynamic_w,
                                       c.power_clock_exponent,
                                       c.memory_dynamic_w};
  FittedPrediction out;
  out.prior_throughput_img_s = prior.throughput;
  out.prior_power_w = detail::power_prior(pq, phi, prior.activity, prior.traffic);
  out.throughput_img_s = out.prior_throughput_img_s;
  out.power_w = out.prior_power_w;
  if (!model.throughput_residual.empty() || !model.power_residual.empty()) {
    const auto x = detail::residual_features(fractions.data(), batches.data(), batches.size(), phi, prior);
    out.throughput_img_s *= std::exp(model.throughput_residual.evaluate(x));
    out.power_w *= std::exp(model.power_residual.evaluate(x));
  }
  out.u_sm_pct = std::clamp(100.0 * c.sm_util_scale * prior.busy_union, 0.0, 100.0);
  if (c.has_mem_util) out.u_mem_pct = std::clamp(100.0 * c.mem_util_scale * prior.traffic, 0.0, 100.0);
  return out;
}

std::string FittedPredictor::to_json() const {
  const auto& r = report_;
  nlohmann::json fit{{"rows_read", r.rows_read},
                     {"rows_other_models", r.rows_other_models},
                     {"rows_oom", r.rows_oom},
                     {"rows_idle", r.rows_idle},
                     {"rows_used", r.rows_used},
                     {"rows_train", r.rows_train},
                     {"rows_held_out", r.rows_held_out},
                     {"other_models", r.other_models},
                     {"held_out_throughput", accuracy_json(r.held_out_throughput)},
                     {"held_out_power", accuracy_json(r.held_out_power)},
                     {"held_out_throughput_prior", accuracy_json(r.held_out_throughput_prior)},
                     {"held_out_power_prior", accuracy_json(r.held_out_power_prior)},
                     {"fitted_throughput", accuracy_json(r.fitted_throughput)},
                     {"fitted_power", accuracy_json(r.fitted_power)},
                     {"notes", r.notes}};
  auto clocks = nlohmann::json::array();
  for (const auto& m : clocks_) {
    const auto& c = m.prior;
    clocks.push_back({{"memory_clock_mhz", c.memory_clock_mhz},
                      {"f_ref_mhz", c.f_ref_mhz},
                      {"throughput",
                       {{"work_s", c.work_s},
                        {"overhead_s", c.overhead_s},
                        {"fill_batch", c.fill_batch},
                        {"fill_sharpness", c.fill_sharpness},
                        {"share_exponent", c.share_exponent},
                        {"bandwidth_s", c.bandwidth_s},
                        {"interference", c.interference},
                        {"clock_exponent", c.clock_exponent},
                        {"clock_insensitive", c.clock_insensitive}}},
                      {"power",
                       {{"static_w", {c.static_w[0], c.static_w[1], c.static_w[2], c.static_w[3]}},
                        {"sm_dynamic_w", c.sm_dynamic_w},
                        {"clock_exponent", c.power_clock_exponent},
                        {"memory_dynamic_w", c.memory_dynamic_w}}},
                      {"utilisation",
                       {{"sm_scale", c.sm_util_scale},
                        {"mem_scale", c.mem_util_scale},
                        {"has_mem_util", c.has_mem_util}}},
                      {"throughput_residual", regressor_json(m.throughput_residual)},
                      {"power_residual", regressor_json(m.power_residual)}});
  }
  const nlohmann::json out{{"format", kFormat}, {"version", kVersion}, {"model", model_},
                           {"fit", fit},        {"memory_clocks", clocks}};
  return out.dump(1) + "\n";
}

FittedPredictor FittedPredictor::from_json(const std::string& text, const std::string& source) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string reason = e.what();
    if (const auto colon = reason.rfind(": "); colon != std::string::npos) reason = reason.substr(colon + 2);
    throw data_error(source, 0, "not a gpucap predictor: invalid JSON: " + reason);
  }
  if (!json.is_object() || !json.contains("format") || json["format"] != kFormat) {
    throw data_error(source, 0, fmt::format("not a gpucap predictor (expected \"format\": \"{}\")", kFormat));
  }
  const JsonFields f(json, source);
  if (f.integer("version") != kVersion) {
    throw f.error("version", fmt::format("{} is not supported (this gpucap reads version {})", f.integer("version"), kVersion));
  }
  FittedPredictor p;
  p.model_ = f.string("model");
  const auto fit = f.object("fit");
  auto& r = p.report_;
  r.model = p.model_;
  r.rows_read = count(fit, "rows_read");
  r.rows_other_models = count(fit, "rows_other_models");
  r.rows_oom = count(fit, "rows_oom");
  r.rows_idle = count(fit, "rows_idle");
  r.rows_used = count(fit, "rows_used");
  r.rows_train = count(fit, "rows_train");
  r.rows_held_out = count(fit, "rows_held_out");
  r.other_models = fit.strings_or_empty("other_models");
  r.held_out_throughput = parse_accuracy(fit, "held_out_throughput");
  r.held_out_power = parse_accuracy(fit, "held_out_power");
  r.held_out_throughput_prior = parse_accuracy(fit, "held_out_throughput_prior");
  r.held_out_power_prior = parse_accuracy(fit, "held_out_power_prior");
  r.fitted_throughput = parse_accuracy(fit, "fitted_throughput");
  r.fitted_power = parse_accuracy(fit, "fitted_power");
  r.notes = fit.strings_or_empty("notes");
  const auto& clocks = f.at("memory_clocks");
  if (!clocks.is_array() || clocks.empty()) throw f.error("memory_clocks", "must be a non-empty array");
  for (std::size_t i = 0; i < clocks.size(); ++i) {
    const JsonFields m(clocks[i], source, fmt::format("memory_clocks[{}].", i));
    FittedClockModel model;
    auto& c = model.prior;
    c.memory_clock_mhz = m.positive("memory_clock_mhz");
    c.f_ref_mhz = m.positive("f_ref_mhz");
    const auto t = m.object("throughput");
    c.work_s = t.positive("work_s");
    c.overhead_s = t.positive("overhead_s");
    c.fill_batch = t.positive("fill_batch");
    c.fill_sharpness = t.positive("fill_sharpness");
    c.share_exponent = t.positive("share_exponent");
    c.bandwidth_s = t.positive("bandwidth_s");
    c.interference = t.non_negative("interference");
    c.clock_exponent = t.positive("clock_exponent");
    c.clock_insensitive = t.non_negative("clock_insensitive");
    if (c.clock_insensitive >= 1.0) throw t.error("clock_insensitive", "must be below 1");
    const auto pw = m.object("power");
    const auto s = number_array(pw, "static_w", 4);
    for (std::size_t k = 0; k < 4; ++k) {
      if (s[k] < 0.0) throw pw.error("static_w", "must not be negative");
      c.static_w[k] = s[k];
    }
    c.sm_dynamic_w = pw.non_negative("sm_dynamic_w");
    c.power_clock_exponent = pw.positive("clock_exponent");
    c.memory_dynamic_w = pw.non_negative("memory_dynamic_w");
    const auto u = m.object("utilisation");
    c.sm_util_scale = u.positive("sm_scale");
    c.mem_util_scale = u.positive("mem_scale");
    const auto& has = u.at("has_mem_util");
    if (!has.is_boolean()) throw u.error("has_mem_util", "must be true or false");
    c.has_mem_util = has.get<bool>();
    model.throughput_residual = parse_regressor(m, "throughput_residual");
    model.power_residual = parse_regressor(m, "power_residual");
    if (!p.clocks_.empty() && c.memory_clock_mhz <= p.clocks_.back().prior.memory_clock_mhz + kMemoryClockTolerance) {
      throw m.error("memory_clock_mhz", "memory clocks must be listed once each, in ascending order");
    }
    p.clocks_.push_back(std::move(model));
  }
  return p;
}

FittedPredictor FittedPredictor::load(const std::string& path) { return from_json(read_text_file(path), path); }

void FittedPredictor::save(const std::string& path) const { write_text_file(path, to_json()); }

tune::PartitionPredictor as_partition_predictor(const FittedPredictor& predictor) {
  auto shared = std::make_shared<const FittedPredictor>(predictor);
  return [shared](const std::vector<tune::Tenant>& tenants, double sm_clock_mhz, double memory_clock_mhz) {
    std::array<double, kMaxTenants> shares{};
    std::array<int, kMaxTenants> batches{};
    const std::size_t n = tenants.size();
    if (n > kMaxTenants) throw usage_error(fmt::format("{} tenants: at most {} are supported", n, kMaxTenants));
    for (std::size_t i = 0; i < n; ++i) {
      shares[i] = tenants[i].share_pct;
      batches[i] = tenants[i].batch;
    }
    const auto r = shared->predict(std::span<const double>(shares.data(), n), std::span<const int>(batches.data(), n),
                                   sm_clock_mhz, memory_clock_mhz);
    return tune::PartitionPrediction{r.throughput_img_s, r.power_w};
  };
}

}  // namespace gpucap::predict
