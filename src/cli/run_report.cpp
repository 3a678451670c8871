#include "run_report.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>

#include "gpucap/core/clocks.hpp"

namespace gpucap::cli {

void print_summary_lines(const runtime::RunSummary& s) {
  const auto line = [&s](const char* label, const std::string& value) {
    fmt::print("  {:<22} {:>14}  [{}]\n", label, value, s.simulated ? "simulated" : "real");
  };
  line("images", fmt::format("{}", s.images));
  line("duration", fmt::format("{:.2f} s", s.duration_s));
  line("throughput", fmt::format("{:.2f} img/s", s.throughput_img_s));
  line("energy", fmt::format("{:.1f} J", s.energy_j));
  line("images per joule", fmt::format("{:.4f}", s.images_per_joule));
  line("windows over cap", fmt::format("{:.2f} % ({}/{})", s.over_cap_windows_pct, s.windows_over_cap, s.windows));
  line("time over cap", fmt::format("{:.2f} s", s.time_over_cap_s));
  line("mean power", fmt::format("{:.2f} W", s.mean_power_w));
  line("max power", fmt::format("{:.2f} W", s.max_power_w));
}

namespace {

// The clock --governor-clock holds, snapped to the GPU's clocks as the twin does; nullopt without it.
std::optional<double> governor_clock_mhz(const runtime::SimJobSpec& spec, const sim::Catalog& catalog) {
  if (!spec.sim.governor_sm_clock_mhz) return std::nullopt;
  return nearest_clock_mhz(catalog.gpu(spec.gpu).sm_clocks_mhz, *spec.sim.governor_sm_clock_mhz);
}

}  // namespace

void print_text(const runtime::SimJobSpec& spec, const sim::Catalog& catalog, const runtime::RunSummary& s) {
  const auto& gpu = catalog.gpu(spec.gpu);
  const auto& model = catalog.model(spec.model);
  fmt::print("gpucap run on the SIMULATED {} (GPU twin, virtual time)\n", gpu.name);
  const auto governor_mhz = governor_clock_mhz(spec, catalog);
  const auto governor = governor_mhz ? fmt::format(", governor at {:g} MHz", *governor_mhz) : std::string();
  fmt::print("  model {} ({}), dataset {}, algorithm {}, cap {}, input pipeline {}{}{}{}\n", model.id,
             sim::to_string(spec.precision.value_or(model.precision)), catalog.dataset(spec.dataset).id,
             spec.algorithm, spec.live_cap ? "the cluster's allocation" : spec.schedule.to_string(), sim::to_string(spec.pipeline),
             spec.sim.autotune_new_shapes ? ", autotuning each new batch size" : "",
             spec.sim.spawned_nvidia_smi ? ", sampled by spawned nvidia-smi" : "", governor);
  print_summary_lines(s);
}

nlohmann::json summary_json(const runtime::RunSummary& s) {
  return {{"simulated", s.simulated},
          {"images", s.images},
          {"duration_s", s.duration_s},
          {"throughput_img_s", s.throughput_img_s},
          {"energy_j", s.energy_j},
          {"images_per_joule", s.images_per_joule},
          {"windows", s.windows},
          {"windows_over_cap", s.windows_over_cap},
          {"over_cap_windows_pct", s.over_cap_windows_pct},
          {"time_over_cap_s", s.time_over_cap_s},
          {"mean_power_w", s.mean_power_w},
          {"max_power_w", s.max_power_w},
          {"stopped_by_signal", s.stopped}};
}

nlohmann::json to_json(const runtime::SimJobSpec& spec, const sim::Catalog& catalog, const runtime::RunSummary& s) {
  auto out = summary_json(s);
  out.update(nlohmann::json{{"gpu", catalog.gpu(spec.gpu).id},
          {"model", catalog.model(spec.model).id},
          {"dataset", catalog.dataset(spec.dataset).id},
          {"algorithm", spec.algorithm},
          {"cap", spec.schedule.to_string()},
          {"input_pipeline", sim::to_string(spec.pipeline)},
          {"autotune_new_shapes", spec.sim.autotune_new_shapes},
          {"sampler", spec.sim.spawned_nvidia_smi ? "nvidia-smi" : "fixed"},
          {"seed", spec.sim.seed}});
  if (const auto mhz = governor_clock_mhz(spec, catalog)) out["governor_clock_mhz"] = *mhz;
  return out;
}

}  // namespace gpucap::cli
