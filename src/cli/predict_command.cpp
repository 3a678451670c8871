// gpucap predict: PctoDL's predictor (predict/pctodl.hpp) for one multi-tenant configuration —
// MPS shares, batch sizes, SM clock — on the RTX 3080 Ti or the A100; or, with --fitted, gpucap's
// own predictor fitted by `gpucap fit` (predict/fitted.hpp) for any GPU that was profiled.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <vector>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/predict/fitted.hpp"
#include "gpucap/predict/pctodl.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::cli {

namespace {

struct PredictFlags {
  std::optional<std::string> params_dir;
  std::string model;
  std::string gpu;
  std::vector<double> shares_pct;
  std::vector<int> batches;
  double sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;  // 0: the GPU's default set
  std::optional<std::string> param_set;
  std::optional<std::string> fitted;  // a model written by gpucap fit
  bool json = false;
};

void check_tenants(const PredictFlags& flags) {
  if (flags.shares_pct.empty()) throw usage_error("--p needs one MPS share per tenant");
  if (flags.shares_pct.size() != flags.batches.size()) {
    throw usage_error(fmt::format("--p lists {} tenants but --b lists {}", flags.shares_pct.size(), flags.batches.size()));
  }
  double total = 0.0;
  for (const double p : flags.shares_pct) {
    if (!(p > 0.0 && p <= 100.0)) throw usage_error(fmt::format("MPS share {:g} % must be in (0, 100]", p));
    total += p;
  }
  if (total > 100.0 + 1e-9) throw usage_error(fmt::format("MPS shares add up to {:g} %, more than 100 %", total));
  for (const int b : flags.batches) {
    if (b < 1 || b > 100'000) throw usage_error(fmt::format("batch size {} must be between 1 and 100000", b));
  }
  if (!(flags.sm_clock_mhz > 0.0 && flags.sm_clock_mhz <= 10'000.0)) {
    throw usage_error(fmt::format("--f {:g} MHz must be a positive SM clock", flags.sm_clock_mhz));
  }
}

void predict_fitted(const PredictFlags& flags, bool gpu_given, bool mem_given) {
  if (flags.params_dir || flags.param_set || gpu_given) {
    throw usage_error("--fitted replaces PctoDL's --params, --param-set and --gpu: give one or the other");
  }
  const auto predictor = predict::FittedPredictor::load(*flags.fitted);
  if (!flags.model.empty() && name_key(flags.model) != name_key(predictor.model())) {
    throw usage_error(fmt::format("{} is a predictor of {}, not {}", *flags.fitted, predictor.model(), flags.model));
  }
  const auto clocks = predictor.memory_clocks_mhz();
  double memory_clock_mhz = flags.memory_clock_mhz;
  if (!mem_given) {
    if (clocks.size() != 1) {
      std::vector<std::string> names;
      for (const double m : clocks) names.push_back(fmt::format("{:g}", m));
      throw usage_error(fmt::format("{} was fitted at memory clocks {} MHz: choose one with --mem", *flags.fitted,
                                    join(names, ", ")));
    }
    memory_clock_mhz = clocks.front();
  }
  const auto r = predictor.predict(flags.shares_pct, flags.batches, flags.sm_clock_mhz, memory_clock_mhz);
  if (flags.json) {
    std::cout << nlohmann::json{{"u_sm", r.u_sm_pct},
                                {"u_mem", r.u_mem_pct ? nlohmann::json(*r.u_mem_pct) : nlohmann::json()},
                                {"throughput", r.throughput_img_s},
                                {"power", r.power_w},
                                {"model", predictor.model()},
                                {"predictor", "fitted"},
                                {"fitted", *flags.fitted},
                                {"memory_clock_mhz", memory_clock_mhz},
                                {"predicted", true}}
                     .dump(2)
              << "\n";
    return;
  }
  fmt::print("gpucap's fitted predictor, {} ({}, memory clock {:g} MHz), SM clock {:g} MHz — a prediction, not a "
             "measurement\n",
             predictor.model(), *flags.fitted, memory_clock_mhz, flags.sm_clock_mhz);
  fmt::print("  SM utilisation      {:8.2f} %\n", r.u_sm_pct);
  if (r.u_mem_pct) fmt::print("  memory utilisation  {:8.2f} %\n", *r.u_mem_pct);
  fmt::print("  throughput          {:8.1f} img/s\n", r.throughput_img_s);
  fmt::print("  power               {:8.1f} W (window maximum)\n", r.power_w);
}

}  // namespace

Command add_predict_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<PredictFlags>();
  auto* cmd = app.add_subcommand(
      "predict",
      "PctoDL's predictor (or, with --fitted, gpucap's own): SM and memory utilisation, throughput and power of MPS "
      "tenants at an SM clock");
  cmd->add_option("--params", flags->params_dir,
                  "PctoDL parameter folder (default: $GPUCAP_PCTODL_PARAMS, else ../shared/data/pctodl)");
  cmd->add_option("--model", flags->model,
                  "Model as PctoDL names it (resnet50, mobilenet_v2, mnasnet, ...); required unless --fitted");
  auto* gpu = cmd->add_option("--gpu", flags->gpu, "3080ti or a100; required unless --fitted");
  cmd->add_option("--p", flags->shares_pct, "MPS share of each tenant in percent, e.g. --p 50 25")->required();
  cmd->add_option("--b", flags->batches, "Batch size of each tenant, e.g. --b 16 16")->required();
  cmd->add_option("--f", flags->sm_clock_mhz, "SM clock in MHz")->required();
  auto* mem = cmd->add_option("--mem", flags->memory_clock_mhz,
                              "Memory clock in MHz (3080 Ti: 5001 or 9501; A100: 1215; --fitted: the model's only one)");
  cmd->add_option("--param-set", flags->param_set,
                  "Parameter set (suffix), e.g. imagenet_mem9501 (default: PctoDL's ImageNet set for the GPU and --mem)");
  cmd->add_option("--fitted", flags->fitted,
                  "Use gpucap's own predictor, a MODEL.json written by `gpucap fit`, instead of PctoDL's");
  cmd->add_flag("--json", flags->json, "Print {u_sm, u_mem, throughput, power} as JSON");
  return Command{cmd, [flags, gpu, mem, &global] {
                   check_tenants(*flags);
                   if (flags->fitted) {
                     predict_fitted(*flags, gpu->count() > 0, mem->count() > 0);
                     return;
                   }
                   if (flags->model.empty()) throw usage_error("--model is required (or --fitted MODEL.json)");
                   if (flags->gpu.empty()) throw usage_error("--gpu is required (or --fitted MODEL.json)");
                   auto set = flags->param_set.value_or(
                       predict::default_pctodl_param_set(flags->gpu, flags->memory_clock_mhz));
                   if (!set.empty() && set.front() == '_') set.erase(0, 1);
                   // PctoDL's GPUs are the twin's: --f must be one of the GPU's SM clocks' range.
                   const auto gpu_key = name_key(flags->gpu);
                   if (gpu_key != "a100" && gpu_key != "3080ti" && gpu_key != "rtx3080ti") {
                     throw usage_error(fmt::format("PctoDL has fits for the RTX 3080 Ti and the A100, not '{}'", flags->gpu));
                   }
                   const auto catalog = sim::Catalog::load(resolve_data_dir(global));
                   const auto& twin_gpu = catalog.gpu(gpu_key == "a100" ? "a100" : "rtx3080ti");
                   if (!(flags->sm_clock_mhz >= twin_gpu.min_sm_clock_mhz() && flags->sm_clock_mhz <= twin_gpu.max_sm_clock_mhz())) {
                     throw usage_error(fmt::format("--f {:g} MHz is outside the {}'s SM clocks [{:g}, {:g}] MHz",
                                                   flags->sm_clock_mhz, twin_gpu.name, twin_gpu.min_sm_clock_mhz(),
                                                   twin_gpu.max_sm_clock_mhz()));
                   }
                   const auto predictor = predict::PctodlPredictor::load(
                       resolve_pctodl_params_dir(flags->params_dir), flags->model, set);
                   if (flags->param_set) {
                     // A set is fitted at one memory clock of one of PctoDL's GPUs: --mem's and --gpu's.
                     const double set_mhz = predictor.memory_clock_mhz();
                     if (flags->memory_clock_mhz != 0.0 && flags->memory_clock_mhz != set_mhz) {
                       throw usage_error(fmt::format("--param-set {} is fitted at memory clock {:g} MHz, not --mem {:g}",
                                                     set, set_mhz, flags->memory_clock_mhz));
                     }
                     try {
                       (void)predict::default_pctodl_param_set(flags->gpu, set_mhz);
                     } catch (const Error&) {
                       throw usage_error(fmt::format("--param-set {} is fitted at memory clock {:g} MHz, which PctoDL's "
                                                     "fits of --gpu {} do not have",
                                                     set, set_mhz, flags->gpu));
                     }
                   }
                   const auto r = predictor.predict(flags->shares_pct, flags->batches, flags->sm_clock_mhz);
                   if (flags->json) {
                     std::cout << nlohmann::json{{"u_sm", r.u_sm},
                                                 {"u_mem", r.u_mem},
                                                 {"throughput", r.throughput},
                                                 {"power", r.power_w},
                                                 {"model", predictor.model()},
                                                 {"param_set", predictor.param_set()},
                                                 {"memory_clock_mhz", predictor.memory_clock_mhz()},
                                                 {"predicted", true}}
                                      .dump(2)
                              << "\n";
                     return;
                   }
                   fmt::print("PctoDL predictor, {} ({}, memory clock {:g} MHz), SM clock {:g} MHz — a prediction, "
                              "not a measurement\n",
                              predictor.model(), predictor.param_set(), predictor.memory_clock_mhz(),
                              flags->sm_clock_mhz);
                   fmt::print("  SM utilisation      {:8.2f} %\n", r.u_sm);
                   fmt::print("  memory utilisation  {:8.2f} %\n", r.u_mem);
                   fmt::print("  throughput          {:8.1f} img/s\n", r.throughput);
                   fmt::print("  power               {:8.1f} W (window maximum)\n", r.power_w);
                 }};
}

}  // namespace gpucap::cli
