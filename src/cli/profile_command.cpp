// gpucap profile: PctoDL's profiling matrix (runtime/mps_profile.hpp) on the simulated GPU, written
// in PctoDL's profile CSV columns for `gpucap fit`.

#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <unistd.h>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/runtime/mps_profile.hpp"
#include "gpucap/runtime/sim_platform.hpp"

namespace gpucap::cli {

namespace {

struct ProfileFlags {
  std::string gpu;
  std::string model;
  std::string out;
  std::optional<double> memory_clock_mhz;  // default: the GPU's default memory clock
  bool sweeps = false;
  double measure_s = 7.0;
  std::string seed = "1";
  double sample_hz = 20.0;
};

}  // namespace

Command add_profile_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<ProfileFlags>();
  auto* cmd = app.add_subcommand(
      "profile", "PctoDL's MPS profiling matrix (shares × tenants × batch, frequency sweeps) on the simulated GPU, "
                 "as a profile CSV for 'gpucap fit'");
  cmd->add_option("--gpu", flags->gpu, "GPU of the twin (see 'gpucap list gpus')")->required();
  cmd->add_option("--model", flags->model, "Model (see 'gpucap list models')")->required();
  cmd->add_option("--out", flags->out, "CSV file to write (PctoDL's profile columns)")->required();
  cmd->add_option("--mem", flags->memory_clock_mhz, "Memory clock in MHz (default: the GPU's default)");
  cmd->add_flag("--sweeps", flags->sweeps, "Add the frequency sweeps (4×25 %, 2×50 %, 10×10 % at batches 8/16/32)");
  cmd->add_option("--measure-s", flags->measure_s, "Length of each measurement (upstream: 7 s)")->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the twin's noise")->capture_default_str();
  cmd->add_option("--sample-hz", flags->sample_hz, "Power sampling rate (upstream: every 50 ms)")->capture_default_str();
  return Command{cmd, [flags, &global] {
                   const auto catalog = sim::Catalog::load(resolve_data_dir(global));
                   const auto& gpu = catalog.gpu(flags->gpu);
                   const auto& model = catalog.model(flags->model);
                   const double memory_mhz = flags->memory_clock_mhz.value_or(gpu.default_memory_clock_mhz);
                   if (std::find(gpu.memory_clocks_mhz.begin(), gpu.memory_clocks_mhz.end(), memory_mhz) ==
                       gpu.memory_clocks_mhz.end()) {
                     throw usage_error(fmt::format("the {} has no memory clock {:g} MHz", gpu.name, memory_mhz));
                   }
                   runtime::TrialOptions options;
                   options.measure_s = flags->measure_s;
                   options.sample_hz = flags->sample_hz;
                   options.seed = parse_seed(flags->seed);
                   const runtime::SimTrialRunner runner(catalog, gpu.id, model.id, options);
                   const auto configs = runtime::pctodl_profile_configs(gpu, memory_mhz, flags->sweeps);
                   std::string csv = runtime::profile_csv_header();
                   for (std::size_t i = 0; i < configs.size(); ++i) {
                     csv += runtime::profile_csv_row(model.id, runtime::measure_profile_row(runner, gpu, model, configs[i]));
                     if (isatty(fileno(stderr)) != 0) std::fprintf(stderr, "\r%zu/%zu", i + 1, configs.size());
                   }
                   if (isatty(fileno(stderr)) != 0) std::fprintf(stderr, "\n");
                   write_text_file(flags->out, csv);
                   fmt::print("profiled {} configurations of {} on the {} (simulated, memory {:g} MHz): {}\n",
                              configs.size(), model.id, gpu.name, memory_mhz, flags->out);
                 }};
}

}  // namespace gpucap::cli
