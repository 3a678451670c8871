#include "gpucap/bso/job_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::bso {
namespace {

Error field_error(std::string_view key, std::string_view message) {
  return usage_error(fmt::format("{}: {}", key, message));
}

double number_field(const nlohmann::json& body, const char* key, double fallback) {
  if (!body.contains(key) || body.at(key).is_null()) return fallback;
  const auto& v = body.at(key);
  if (!v.is_number()) throw field_error(key, "must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw field_error(key, "must be finite");
  return x;
}

long long integer_value(const nlohmann::json& v, const char* key) {
  // Beyond 2^63 (an unsigned JSON number), get<long long> would wrap to a negative number.
  constexpr auto largest = static_cast<unsigned long long>(std::numeric_limits<long long>::max());
  if (v.is_number_unsigned() && v.get<unsigned long long>() > largest) throw field_error(key, "out of range");
  if (v.is_number_integer()) return v.get<long long>();
  // pydantic v1 turns 250.0 into 250 for an int field; a fraction is an error here.
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::abs(x) < 9.0e15) return static_cast<long long>(x);
  }
  throw field_error(key, "must be a whole number");
}

int int_field(const nlohmann::json& body, const char* key, int fallback) {
  if (!body.contains(key) || body.at(key).is_null()) return fallback;
  const long long x = integer_value(body.at(key), key);
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) throw field_error(key, "out of range");
  return static_cast<int>(x);
}

std::string string_field(const nlohmann::json& body, const char* key, bool required) {
  if (!body.contains(key) || body.at(key).is_null()) {
    if (required) throw field_error(key, "field required");
    return {};
  }
  if (!body.at(key).is_string()) throw field_error(key, "must be a string");
  return body.at(key).get<std::string>();
}

bool bool_field(const nlohmann::json& body, const char* key, bool fallback) {
  if (!body.contains(key) || body.at(key).is_null()) return fallback;
  if (!body.at(key).is_boolean()) throw field_error(key, "must be true or false");
  return body.at(key).get<bool>();
}

}  // namespace

const char* optimizer_name(OptimizerKind kind) { return kind == OptimizerKind::zeus ? "zeus" : "gpucap"; }

OptimizerKind parse_optimizer(std::string_view text) {
  if (text == "zeus") return OptimizerKind::zeus;
  if (text == "gpucap") return OptimizerKind::gpucap;
  throw usage_error(fmt::format("unknown optimizer '{}' (zeus or gpucap)", text));
}

void validate(JobSpec& spec) {
  if (spec.job_id_prefix.empty()) throw field_error("job_id_prefix", "must not be empty");
  if (!spec.job_id.empty() && !spec.job_id.starts_with(spec.job_id_prefix)) {
    throw field_error("job_id", fmt::format("'{}' does not start with prefix '{}'", spec.job_id, spec.job_id_prefix));
  }
  if (spec.batch_sizes.empty()) throw field_error("batch_sizes", "must not be empty");
  std::sort(spec.batch_sizes.begin(), spec.batch_sizes.end());
  if (spec.batch_sizes.front() <= 0) throw field_error("batch_sizes", "must all be positive");
  if (std::adjacent_find(spec.batch_sizes.begin(), spec.batch_sizes.end()) != spec.batch_sizes.end()) {
    throw field_error("batch_sizes", "must not repeat a batch size");
  }
  if (spec.default_batch_size <= 0) throw field_error("default_batch_size", "must be greater than 0");
  if (!std::binary_search(spec.batch_sizes.begin(), spec.batch_sizes.end(), spec.default_batch_size)) {
    throw field_error("default_batch_size", fmt::format("{} is not in batch_sizes", spec.default_batch_size));
  }
  if (!(spec.eta_knob >= 0.0 && spec.eta_knob <= 1.0)) throw field_error("eta_knob", "must be in [0, 1]");
  if (spec.beta_knob && !(*spec.beta_knob > 0.0)) {
    throw field_error("beta_knob", "must be positive (null disables early stopping)");
  }
  if (!std::isfinite(spec.target_metric)) throw field_error("target_metric", "must be finite");
  if (spec.max_epochs <= 0) throw field_error("max_epochs", "must be greater than 0");
  if (spec.num_pruning_rounds < 0) throw field_error("num_pruning_rounds", "must be 0 or more");
  if (spec.window_size < 0) throw field_error("window_size", "must be 0 (all) or more");
  if (!std::isfinite(spec.mab_prior_mean)) throw field_error("mab_prior_mean", "must be finite");
  if (!(spec.mab_prior_precision >= 0.0) || !std::isfinite(spec.mab_prior_precision)) {
    throw field_error("mab_prior_precision", "must be 0 or more");
  }
  if (spec.mab_num_explorations < 0) throw field_error("mab_num_explorations", "must be 0 or more");
  if (!(spec.max_power > 0.0) || !std::isfinite(spec.max_power)) throw field_error("max_power", "must be greater than 0");
  if (spec.number_of_gpus <= 0) throw field_error("number_of_gpus", "must be greater than 0");
  if (spec.gpu_model.empty()) throw field_error("gpu_model", "must not be empty");
}

JobSpec job_spec_from_json(const nlohmann::json& body) {
  if (!body.is_object()) throw usage_error("the job must be a JSON object");
  JobSpec spec;
  spec.job_id = string_field(body, "job_id", false);
  spec.job_id_prefix = string_field(body, "job_id_prefix", true);
  if (!body.contains("batch_sizes") || body.at("batch_sizes").is_null()) throw field_error("batch_sizes", "field required");
  if (!body.at("batch_sizes").is_array()) throw field_error("batch_sizes", "must be a list of whole numbers");
  for (const auto& b : body.at("batch_sizes")) {
    const long long x = integer_value(b, "batch_sizes");
    if (x <= 0 || x > std::numeric_limits<int>::max()) throw field_error("batch_sizes", "must all be positive");
    spec.batch_sizes.push_back(static_cast<int>(x));
  }
  if (!body.contains("default_batch_size")) throw field_error("default_batch_size", "field required");
  spec.default_batch_size = int_field(body, "default_batch_size", 0);
  spec.eta_knob = number_field(body, "eta_knob", spec.eta_knob);
  if (body.contains("beta_knob") && body.at("beta_knob").is_null()) {
    spec.beta_knob.reset();
  } else {
    spec.beta_knob = number_field(body, "beta_knob", *spec.beta_knob);
  }
  spec.target_metric = number_field(body, "target_metric", spec.target_metric);
  spec.higher_is_better_metric = bool_field(body, "higher_is_better_metric", spec.higher_is_better_metric);
  spec.max_epochs = int_field(body, "max_epochs", spec.max_epochs);
  spec.num_pruning_rounds = int_field(body, "num_pruning_rounds", spec.num_pruning_rounds);
  spec.window_size = int_field(body, "window_size", spec.window_size);
  spec.mab_prior_mean = number_field(body, "mab_prior_mean", spec.mab_prior_mean);
  spec.mab_prior_precision = number_field(body, "mab_prior_precision", spec.mab_prior_precision);
  spec.mab_num_explorations = int_field(body, "mab_num_explorations", spec.mab_num_explorations);
  if (body.contains("mab_seed") && !body.at("mab_seed").is_null()) spec.mab_seed = integer_value(body.at("mab_seed"), "mab_seed");
  if (!body.contains("max_power")) throw field_error("max_power", "field required");
  spec.max_power = number_field(body, "max_power", 0.0);
  if (!body.contains("number_of_gpus")) throw field_error("number_of_gpus", "field required");
  spec.number_of_gpus = int_field(body, "number_of_gpus", 0);
  spec.gpu_model = string_field(body, "gpu_model", true);
  const auto optimizer = string_field(body, "optimizer", false);
  if (!optimizer.empty()) spec.optimizer = parse_optimizer(optimizer);
  validate(spec);
  return spec;
}

nlohmann::json to_json(const JobSpec& spec) {
  nlohmann::json j;
  j["job_id"] = spec.job_id;
  j["job_id_prefix"] = spec.job_id_prefix;
  j["batch_sizes"] = spec.batch_sizes;
  j["default_batch_size"] = spec.default_batch_size;
  j["eta_knob"] = spec.eta_knob;
  j["beta_knob"] = spec.beta_knob ? nlohmann::json(*spec.beta_knob) : nlohmann::json(nullptr);
  j["target_metric"] = spec.target_metric;
  j["higher_is_better_metric"] = spec.higher_is_better_metric;
  j["max_epochs"] = spec.max_epochs;
  j["num_pruning_rounds"] = spec.num_pruning_rounds;
  j["window_size"] = spec.window_size;
  j["mab_prior_mean"] = spec.mab_prior_mean;
  j["mab_prior_precision"] = spec.mab_prior_precision;
  j["mab_num_explorations"] = spec.mab_num_explorations;
  j["mab_seed"] = spec.mab_seed ? nlohmann::json(*spec.mab_seed) : nlohmann::json(nullptr);
  j["max_power"] = spec.max_power;
  j["number_of_gpus"] = spec.number_of_gpus;
  j["gpu_model"] = spec.gpu_model;
  j["optimizer"] = optimizer_name(spec.optimizer);
  return j;
}

}  // namespace gpucap::bso
