#include "gpucap/runtime/mps_planning.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/predict/pctodl.hpp"
#include "gpucap/runtime/mps_profile.hpp"
#include "gpucap/sim/mps_model.hpp"

namespace gpucap::runtime {

namespace {

// PctoDL's name for the GPU ("3080ti", "a100").
std::string pctodl_gpu(const sim::GpuSpec& gpu) {
  if (gpu.id == "rtx3080ti") return "3080ti";
  if (gpu.id == "a100") return "a100";
  throw usage_error(fmt::format("PctoDL has fits for the RTX 3080 Ti and the A100, not the {}", gpu.name));
}

// PctoDL's name for the model (its fits are filed under "mnasnet", "maxvit_t", ...).
std::string pctodl_model(const sim::Catalog& catalog, const sim::ModelSpec& model, const std::string& params_dir) {
  for (const auto& name : predict::pctodl_models(params_dir)) {
    for (const auto& known : catalog.models()) {
      if (known.id != model.id) continue;
      if (name_key(known.id) == name_key(name)) return name;
      for (const auto& alias : known.aliases) {
        if (name_key(alias) == name_key(name)) return name;
      }
    }
  }
  throw usage_error(fmt::format("PctoDL has no fit of {} (in {})", model.id, params_dir));
}

control::ThermoParams thermo_params(const predict::PctodlClosedForm& c) {
  control::ThermoParams p;
  p.f_min_mhz = c.p_f_min;
  p.f_max_mhz = c.p_f_ref;
  p.delta3 = c.delta3;
  p.delta2 = c.delta2;
  p.delta1 = c.delta1;
  p.delta0 = c.delta0;
  p.gamma_p = c.gamma_p;
  p.p_base_w = c.p_base;
  return p;
}

using PredictorsByMemory = std::map<double, predict::PctodlPredictor>;

std::shared_ptr<const PredictorsByMemory> load_pctodl_fits(const sim::Catalog& catalog, const sim::GpuSpec& gpu,
                                                           const sim::ModelSpec& model, const std::string& params_dir,
                                                           const std::vector<double>& memory_clocks_mhz) {
  const auto gpu_name = pctodl_gpu(gpu);
  const auto model_name = pctodl_model(catalog, model, params_dir);
  auto fits = std::make_shared<PredictorsByMemory>();
  for (const double m : memory_clocks_mhz) {
    fits->emplace(m, predict::PctodlPredictor::load(params_dir, model_name,
                                                    predict::default_pctodl_param_set(gpu_name, m)));
  }
  return fits;
}

std::pair<std::vector<double>, std::vector<int>> shares_and_batches(const std::vector<tune::Tenant>& tenants) {
  std::vector<double> shares;
  std::vector<int> batches;
  shares.reserve(tenants.size());
  batches.reserve(tenants.size());
  for (const auto& t : tenants) {
    shares.push_back(t.share_pct);
    batches.push_back(t.batch);
  }
  return {shares, batches};
}

tune::PartitionPredictor predictor_of(std::shared_ptr<const PredictorsByMemory> fits) {
  return [fits](const std::vector<tune::Tenant>& tenants, double f, double m) {
    const auto [shares, batches] = shares_and_batches(tenants);
    const auto r = fits->at(m).predict(shares, batches, f);
    return tune::PartitionPrediction{r.throughput, r.power_w};
  };
}

tune::PartitionCurvePredictor curve_predictor_of(std::shared_ptr<const PredictorsByMemory> fits) {
  return [fits](const std::vector<tune::Tenant>& tenants, double m) -> tune::PartitionCurve {
    const auto [shares, batches] = shares_and_batches(tenants);
    const auto& fit = fits->at(m);
    auto prepared = std::make_shared<const predict::PctodlPrediction>(fit.prepare(shares, batches));
    return [&fit, prepared, fits](double f) {
      const auto r = fit.scale_to_clock(*prepared, f);
      return tune::PartitionPrediction{r.throughput, r.power_w};
    };
  };
}

std::optional<control::PartitionPlan> plan_of(const tune::PartitionSearch& search) {
  if (!search.best) return std::nullopt;
  control::PartitionPlan plan;
  plan.tenants = control::to_tenant_knobs(search.best->tenants);
  plan.sm_clock_mhz = search.best->sm_clock_mhz;
  plan.memory_clock_mhz = search.best->memory_clock_mhz;
  plan.predicted_img_s = search.best->predicted.throughput_img_s;
  plan.predicted_w = search.best->predicted.power_w;
  return plan;
}

predict::ProfileRow fit_row(const sim::ModelSpec& model, const ProfileRow& measured) {
  predict::ProfileRow row;
  row.model = model.id;
  row.shares_pct = measured.config.shares_pct;
  row.batches = measured.config.batches;
  row.target_sm_clock_mhz = measured.config.sm_clock_mhz;
  row.memory_clock_mhz = measured.config.memory_clock_mhz;
  row.sm_clock_mhz = measured.sm_clock_mhz;
  row.sm_util_pct = measured.sm_util_pct;
  row.mem_util_pct = measured.memory_util_pct;
  row.throughput_img_s = measured.measured.throughput_img_s;
  row.power_avg_w = measured.measured.mean_power_w;
  row.power_max_w = measured.measured.max_power_w;
  row.source = "twin profile";
  return row;
}

}  // namespace

std::vector<double> planning_memory_clocks_mhz(const sim::GpuSpec& gpu) {
  std::vector<double> clocks = gpu.memory_clocks_mhz;
  std::sort(clocks.begin(), clocks.end(), std::greater<>());
  std::vector<double> out;
  for (const double m : clocks) {
    if (out.empty() || (out.size() == 1 && m < 0.75 * out.front())) out.push_back(m);
  }
  return out;
}

predict::FittedPredictor fit_predictor_on_twin(const SimTrialRunner& runner, const sim::GpuSpec& gpu,
                                               const sim::ModelSpec& model) {
  std::vector<predict::ProfileRow> rows;
  for (const double m : planning_memory_clocks_mhz(gpu)) {
    auto configs = pctodl_profile_configs(gpu.sm_clocks_mhz, m, /*sweeps=*/true);
    const auto whole = whole_gpu_profile_configs(gpu.sm_clocks_mhz, m);
    configs.insert(configs.end(), whole.begin(), whole.end());
    for (const auto& config : configs) rows.push_back(fit_row(model, measure_profile_row(runner, gpu, model, config)));
  }
  predict::FitOptions options;
  options.model = model.id;
  return predict::fit_predictor(rows, options);
}

tune::PartitionSpace fitted_partition_space(std::vector<double> sm_clocks_mhz,
                                            const predict::FittedPredictor& predictor) {
  if (sm_clocks_mhz.empty()) throw usage_error("partition: the GPU lists no supported SM clocks");
  std::sort(sm_clocks_mhz.begin(), sm_clocks_mhz.end());
  tune::PartitionSpace space;
  space.sm_clocks_mhz = sm_clocks_mhz;
  space.memory_clocks_mhz = predictor.memory_clocks_mhz();
  space.bisection_low_mhz = sm_clocks_mhz.front();
  space.bisection_high_mhz = sm_clocks_mhz.back();
  space.admissible_batches_only = true;
  space.validate();
  return space;
}

std::shared_ptr<const control::MpsPlanning> fitted_planning(const std::vector<double>& sm_clocks_mhz,
                                                            const predict::FittedPredictor& predictor) {
  const auto space = fitted_partition_space(sm_clocks_mhz, predictor);
  const auto predict = predict::as_partition_predictor(predictor);
  auto planning = std::make_shared<control::MpsPlanning>();
  planning->predictor = fmt::format("gpucap's fitted predictor ({})", predictor.model());
  planning->plan = [space, predict](double cap_w) { return plan_of(tune::local_search_partition(space, predict, cap_w)); };
  planning->power_w = [predict](const std::vector<TenantKnobs>& tenants, double f, double m) {
    return predict(control::to_tenants(tenants), f, m).power_w;
  };
  planning->throughput_img_s = [predict](const std::vector<TenantKnobs>& tenants, double f, double m) {
    return predict(control::to_tenants(tenants), f, m).throughput_img_s;
  };
  planning->sm_clocks_mhz = space.sm_clocks_mhz;
  planning->memory_clocks_mhz = space.memory_clocks_mhz;
  std::sort(planning->memory_clocks_mhz.begin(), planning->memory_clocks_mhz.end());
  planning->mps_step_pct = space.mps_step_pct;
  planning->max_batch = space.max_batch;
  return planning;
}

tune::PartitionSpace pctodl_partition_space(const sim::GpuSpec& gpu, const sim::ModelSpec& model) {
  tune::PartitionSpace space;
  space.sm_clocks_mhz = gpu.sm_clocks_mhz;
  space.memory_clocks_mhz = pctodl_gpu(gpu) == "a100" ? std::vector<double>{1215} : std::vector<double>{9501, 5001};
  if (model.id == "vgg19") space.max_batch = 160;  // as upstream
  space.validate();
  return space;
}

tune::PartitionPredictor pctodl_predictor(const sim::Catalog& catalog, const sim::GpuSpec& gpu,
                                          const sim::ModelSpec& model, const std::string& params_dir,
                                          const std::vector<double>& memory_clocks_mhz) {
  return predictor_of(load_pctodl_fits(catalog, gpu, model, params_dir, memory_clocks_mhz));
}

tune::PartitionCurvePredictor pctodl_curve_predictor(const sim::Catalog& catalog, const sim::GpuSpec& gpu,
                                                     const sim::ModelSpec& model, const std::string& params_dir,
                                                     const std::vector<double>& memory_clocks_mhz) {
  return curve_predictor_of(load_pctodl_fits(catalog, gpu, model, params_dir, memory_clocks_mhz));
}

tune::PartitionPredictor twin_partition_predictor(const sim::GpuSpec& gpu, const sim::ModelSpec& model) {
  return [gpu, model](const std::vector<tune::Tenant>& tenants, double f, double m) {
    std::vector<sim::MpsTenant> mps;
    mps.reserve(tenants.size());
    for (const auto& t : tenants) mps.push_back(sim::MpsTenant{static_cast<double>(t.share_pct), t.batch});
    const sim::OperatingPoint point{f, m};
    const auto profile = sim::profile_mps(gpu, model, model.precision, mps, point);
    return tune::PartitionPrediction{profile.throughput_img_s, sim::mps_average_power_w(gpu, profile, point)};
  };
}

std::shared_ptr<const control::MpsPlanning> pctodl_planning(const sim::Catalog& catalog, const sim::GpuSpec& gpu,
                                                            const sim::ModelSpec& model,
                                                            const std::string& params_dir) {
  const auto space = pctodl_partition_space(gpu, model);
  const auto fits = load_pctodl_fits(catalog, gpu, model, params_dir, space.memory_clocks_mhz);
  const auto predict = predictor_of(fits);
  const auto curves = curve_predictor_of(fits);
  auto planning = std::make_shared<control::MpsPlanning>();
  planning->predictor = fmt::format("PctoDL's fits ({})", fits->rbegin()->second.param_set());
  // Upstream's benchmarks plan with the vectorised greedy; the plans are the plain one's.
  planning->plan = [space, curves](double cap_w) -> std::optional<control::PartitionPlan> {
    return plan_of(tune::greedy_partition_vectorised(space, curves, cap_w));
  };
  planning->power_w = [predict](const std::vector<TenantKnobs>& tenants, double f, double m) {
    return predict(control::to_tenants(tenants), f, m).power_w;
  };
  planning->throughput_img_s = [predict](const std::vector<TenantKnobs>& tenants, double f, double m) {
    return predict(control::to_tenants(tenants), f, m).throughput_img_s;
  };
  planning->thermo = [fits](double m) { return thermo_params(fits->at(m).closed_form()); };
  planning->sm_clocks_mhz = gpu.sm_clocks_mhz;
  planning->memory_clocks_mhz = gpu.memory_clocks_mhz;
  planning->mps_step_pct = space.mps_step_pct;
  planning->max_batch = space.max_batch;
  return planning;
}

std::optional<PartitionOracle> partition_oracle(const SimTrialRunner& verifier, const sim::GpuSpec& gpu,
                                                const sim::ModelSpec& model, double cap_w, std::size_t max_tenants,
                                                int max_steps) {
  auto space = pctodl_partition_space(gpu, model);
  space.max_tenants = max_tenants;
  // PctoDL's SolveFreq bisects up to 2,100 MHz on either GPU; the oracle measures what it finds,
  // so it only looks where this GPU can run (an A100 stops at 1,410 MHz).
  space.bisection_high_mhz = std::min(space.bisection_high_mhz, gpu.max_sm_clock_mhz());
  const auto search = tune::exhaustive_partition(space, twin_partition_predictor(gpu, model), cap_w);
  if (!search.best) return std::nullopt;
  PartitionOracle oracle;
  oracle.predictions = search.predictor_calls;
  oracle.plan = *plan_of(search);
  const auto& clocks = gpu.sm_clocks_mhz;
  for (int step = 0; step <= max_steps; ++step) {
    Knobs knobs;
    knobs.tenants = oracle.plan.tenants;
    knobs.sm_clock_mhz = oracle.plan.sm_clock_mhz;
    knobs.mem_clock_mhz = oracle.plan.memory_clock_mhz;
    oracle.measured = verifier.measure_knobs(knobs);
    if (tune::feasible(oracle.measured, cap_w)) return oracle;
    const auto at = std::lower_bound(clocks.begin(), clocks.end(), oracle.plan.sm_clock_mhz);
    if (at == clocks.begin()) break;
    oracle.plan.sm_clock_mhz = *std::prev(at);
  }
  return std::nullopt;
}

}  // namespace gpucap::runtime
