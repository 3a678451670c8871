// gpucap partition: PctoDL's greedy partitioner (tune/partition.hpp, plain and vectorised) and
// gpucap's local search, on PctoDL's predictor, the twin's model or a predictor `gpucap fit` wrote:
// MPS tenants, batch sizes and clocks for the most predicted throughput under a power cap.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/runtime/mps_planning.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/tune/partition.hpp"

namespace gpucap::cli {

namespace {

struct PartitionFlags {
  std::optional<std::string> params_dir;
  std::string model;
  std::string gpu;
  double cap_w = 0.0;
  int mps_step = 5;
  std::optional<double> memory_clock_mhz;  // fixed; default: every fitted memory clock
  bool exhaustive = false;
  std::size_t max_tenants = 4;
  bool json = false;
  std::string predictor = "pctodl";  // or "twin": the simulated GPU's own model; "fitted": gpucap's
  std::optional<std::string> fitted_path;
};

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

nlohmann::json partition_json(const tune::Partition& p) {
  auto tenants = nlohmann::json::array();
  for (const auto& t : p.tenants) tenants.push_back({{"mps_pct", t.share_pct}, {"batch", t.batch}});
  return {{"tenants", tenants},
          {"sm_clock_mhz", p.sm_clock_mhz},
          {"memory_clock_mhz", p.memory_clock_mhz},
          {"throughput_img_s", p.predicted.throughput_img_s},
          {"power_w", p.predicted.power_w}};
}

}  // namespace

Command add_partition_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<PartitionFlags>();
  auto* cmd = app.add_subcommand(
      "partition", "PctoDL's greedy partitioner: MPS tenants, batch sizes and clocks under a power cap (predicted)");
  cmd->add_option("--params", flags->params_dir,
                  "PctoDL parameter folder (default: $GPUCAP_PCTODL_PARAMS, else ../shared/data/pctodl)");
  cmd->add_option("--model", flags->model, "Model as PctoDL names it (resnet50, mobilenet_v2, mnasnet, ...)")
      ->required();
  cmd->add_option("--gpu", flags->gpu, "3080ti or a100")->required();
  cmd->add_option("--power-cap", flags->cap_w, "Power cap in W")->required();
  cmd->add_option("--mps-step", flags->mps_step, "MPS share step in percent")->capture_default_str();
  cmd->add_option("--mem", flags->memory_clock_mhz, "Fix the memory clock (default: try every fitted one)");
  cmd->add_flag("--exhaustive", flags->exhaustive, "Also search every partition, for comparison");
  cmd->add_option("--max-tenants", flags->max_tenants, "Exhaustive search: at most this many tenants")
      ->capture_default_str();
  cmd->add_option("--predictor", flags->predictor,
                  "pctodl: PctoDL's fits; twin: the simulated GPU's own MPS model (what a run on the twin measures); "
                  "fitted: gpucap's own predictor from --fitted FILE")
      ->capture_default_str()
      ->check(CLI::IsMember({"pctodl", "twin", "fitted"}));
  cmd->add_option("--fitted", flags->fitted_path, "--predictor fitted: the model 'gpucap fit' wrote (JSON)");
  cmd->add_flag("--json", flags->json, "Print the result as JSON");
  return Command{cmd, [flags, &global] {
                   const bool fitted = flags->predictor == "fitted";
                   if (fitted != flags->fitted_path.has_value()) {
                     throw usage_error("--fitted FILE goes with --predictor fitted, and only with it");
                   }
                   const auto key = name_key(flags->gpu);
                   const bool pctodl_gpu = key == "3080ti" || key == "rtx3080ti" || key == "a100";
                   if (!fitted && !pctodl_gpu) {
                     throw usage_error(fmt::format("PctoDL has fits for the RTX 3080 Ti and the A100, not '{}'",
                                                   flags->gpu));
                   }
                   const auto catalog = sim::Catalog::load(resolve_data_dir(global));
                   const auto& gpu = catalog.gpu(!pctodl_gpu ? flags->gpu : key == "a100" ? "a100" : "rtx3080ti");
                   if (!(flags->cap_w > 0.0 && flags->cap_w <= gpu.power_limit_max_w)) {
                     throw usage_error(fmt::format("--power-cap {:g} W must be in (0, {:g}] W for the {}", flags->cap_w,
                                                   gpu.power_limit_max_w, gpu.name));
                   }
                   if (flags->max_tenants < 1 || flags->max_tenants > 100) {
                     throw usage_error("--max-tenants must be between 1 and 100");
                   }
                   const auto& model = inference_model(catalog, flags->model);
                   // PctoDL's space (its memory-clock candidates, vgg19's batch cap), or the fitted
                   // predictor's (its memory clocks, admissible batches only), with the flags.
                   std::optional<predict::FittedPredictor> fitted_model;
                   if (fitted) fitted_model = predict::FittedPredictor::load(*flags->fitted_path);
                   auto space = fitted ? runtime::fitted_partition_space(gpu.sm_clocks_mhz, *fitted_model)
                                       : runtime::pctodl_partition_space(gpu, model);
                   if (flags->memory_clock_mhz && flags->predictor == "twin") {
                     // PctoDL's fits and a fitted predictor check --mem against their own clocks; the
                     // twin's are the GPU's.
                     const auto& clocks = gpu.memory_clocks_mhz;
                     if (std::find(clocks.begin(), clocks.end(), *flags->memory_clock_mhz) == clocks.end()) {
                       throw usage_error(fmt::format("the {} has no memory clock {:g} MHz (it has {})", gpu.name,
                                                     *flags->memory_clock_mhz, fmt::join(clocks, ", ")));
                     }
                   }
                   if (flags->memory_clock_mhz) space.memory_clocks_mhz = {*flags->memory_clock_mhz};
                   space.mps_step_pct = flags->mps_step;
                   space.max_tenants = flags->max_tenants;
                   space.validate();
                   const auto params_dir = [&] { return resolve_pctodl_params_dir(flags->params_dir); };
                   const tune::PartitionPredictor predictor =
                       fitted ? predict::as_partition_predictor(*fitted_model)
                       : flags->predictor == "twin"
                           ? runtime::twin_partition_predictor(gpu, model)
                           : runtime::pctodl_predictor(catalog, gpu, model, params_dir(), space.memory_clocks_mhz);
                   const auto timed = [&](auto search) {
                     const auto start = std::chrono::steady_clock::now();
                     auto result = search(space, predictor, flags->cap_w);
                     return std::make_pair(std::move(result), elapsed_ms(start));
                   };
                   const auto [greedy, greedy_ms] = timed(tune::greedy_partition);
                   // Upstream's vectorised greedy: PctoDL's fits split at the SM clock.
                   std::optional<std::pair<tune::PartitionSearch, double>> vectorised;
                   if (flags->predictor == "pctodl") {
                     const auto curves =
                         runtime::pctodl_curve_predictor(catalog, gpu, model, params_dir(), space.memory_clocks_mhz);
                     const auto start = std::chrono::steady_clock::now();
                     auto result = tune::greedy_partition_vectorised(space, curves, flags->cap_w);
                     vectorised.emplace(std::move(result), elapsed_ms(start));
                   }
                   const auto same_plan = [&](const tune::PartitionSearch& v) {
                     return v.best && greedy.best && v.best->tenants == greedy.best->tenants &&
                            v.best->sm_clock_mhz == greedy.best->sm_clock_mhz &&
                            v.best->memory_clock_mhz == greedy.best->memory_clock_mhz;
                   };
                   const auto [local, local_ms] = timed(tune::local_search_partition);
                   std::optional<std::pair<tune::PartitionSearch, double>> exhaustive;
                   if (flags->exhaustive) exhaustive = timed(tune::exhaustive_partition);
                   if (!greedy.best) {
                     throw usage_error(fmt::format("no partition of {} fits under {:g} W (even one tenant at the "
                                                   "lowest clock is predicted above it)",
                                                   flags->model, flags->cap_w));
                   }
                   if (flags->json) {
                     nlohmann::json out{{"model", flags->model},
                                        {"gpu", gpu.id},
                                        {"power_cap_w", flags->cap_w},
                                        {"predicted", true},
                                        {"predictor", flags->predictor},
                                        {"greedy", partition_json(*greedy.best)},
                                        {"greedy_predictor_calls", greedy.predictor_calls},
                                        {"greedy_configurations", greedy.configurations},
                                        {"greedy_wall_ms", greedy_ms}};
                     if (vectorised) {
                       out["greedy_vectorised_wall_ms"] = vectorised->second;
                       out["greedy_vectorised_curves"] = vectorised->first.curves;
                       out["greedy_vectorised_same_plan"] = same_plan(vectorised->first);
                     }
                     if (local.best) {
                       out["local"] = partition_json(*local.best);
                       out["local_predictor_calls"] = local.predictor_calls;
                       out["local_wall_ms"] = local_ms;
                     }
                     if (exhaustive && exhaustive->first.best) {
                       out["exhaustive"] = partition_json(*exhaustive->first.best);
                       out["exhaustive_predictor_calls"] = exhaustive->first.predictor_calls;
                       out["exhaustive_max_tenants"] = flags->max_tenants;
                       out["exhaustive_wall_ms"] = exhaustive->second;
                     }
                     std::cout << out.dump(2) << "\n";
                     return;
                   }
                   const auto& g = *greedy.best;
                   fmt::print("PctoDL greedy partition of {} on the {} under {:g} W — predicted by {}, not measured\n",
                              flags->model, gpu.name, flags->cap_w,
                              fitted                          ? "gpucap's fitted predictor"
                              : flags->predictor == "twin" ? "the twin's MPS model (simulated)"
                                                           : "PctoDL's fits");
                   fmt::print("  tenants             {}\n", tune::describe(g.tenants));
                   fmt::print("  clocks              SM {:.0f} MHz, memory {:g} MHz\n", g.sm_clock_mhz,
                              g.memory_clock_mhz);
                   fmt::print("  throughput          {:.1f} img/s\n", g.predicted.throughput_img_s);
                   fmt::print("  power               {:.1f} W\n", g.predicted.power_w);
                   fmt::print("  searched            {} configurations, {} predictions, {:.1f} ms\n",
                              greedy.configurations, greedy.predictor_calls, greedy_ms);
                   if (vectorised) {
                     fmt::print("  vectorised greedy   {}, {} ensemble evaluations for {} clocks, {:.1f} ms\n",
                                same_plan(vectorised->first) ? "the same plan" : "A DIFFERENT PLAN",
                                vectorised->first.curves, vectorised->first.predictor_calls, vectorised->second);
                   }
                   if (local.best) {
                     const auto& l = *local.best;
                     fmt::print("  gpucap local search {} at SM {:.0f} / mem {:g} MHz: {:.1f} img/s, {:.1f} W; {} "
                                "predictions, {:.1f} ms\n",
                                tune::describe(l.tenants), l.sm_clock_mhz, l.memory_clock_mhz,
                                l.predicted.throughput_img_s, l.predicted.power_w, local.predictor_calls, local_ms);
                   }
                   if (exhaustive && exhaustive->first.best) {
                     const auto& e = *exhaustive->first.best;
                     fmt::print("  exhaustive (≤ {} tenants)  {} at SM {:.0f} / mem {:g} MHz: {:.1f} img/s, {:.1f} W; "
                                "{} predictions, {:.0f} ms; greedy reaches {:.2f} %, local search {:.2f} %\n",
                                flags->max_tenants, tune::describe(e.tenants), e.sm_clock_mhz, e.memory_clock_mhz,
                                e.predicted.throughput_img_s, e.predicted.power_w, exhaustive->first.predictor_calls,
                                exhaustive->second, 100.0 * g.predicted.throughput_img_s / e.predicted.throughput_img_s,
                                local.best ? 100.0 * local.best->predicted.throughput_img_s / e.predicted.throughput_img_s
                                           : 0.0);
                   }
                 }};
}

}  // namespace gpucap::cli
