// gpucap run: one power-capped inference job on the simulated GPU.

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::cli {

namespace {

struct RunFlags {
  std::string gpu = "p40";
  std::string model;
  std::string dataset = "imagenet";
  std::string algorithm;
  std::optional<double> power_cap_w;
  std::optional<std::string> cap_schedule;
  std::optional<long long> images;
  std::optional<double> duration_s;
  std::string seed = "1";
  double sample_hz = 100.0;
  std::optional<std::string> precision;
  std::string input_pipeline = "none";
  bool autotune_new_shapes = false;
  std::optional<int> bobd_budget;
  std::string trace_path;
  bool json = false;
  ControllerFlags controller;
};

// Rows go to disk as they are produced, so an interrupted run keeps what it measured.
class TraceFile {
 public:
  explicit TraceFile(const std::string& path) : path_(path), out_(path, std::ios::trunc) {
    if (!out_) throw Error(ErrorCode::io, fmt::format("{}: cannot open for writing ({})", path, std::strerror(errno)));
    write(runtime::trace_csv_header());
  }
  void write(const std::string& text) {
    out_ << text;
    out_.flush();
    if (!out_) throw Error(ErrorCode::io, fmt::format("{}: write failed", path_));
  }

 private:
  std::string path_;
  std::ofstream out_;
};

CapSchedule cap_schedule(const RunFlags& flags) {
  if (flags.cap_schedule) {
    const auto schedule =
        CapSchedule::parse(*flags.cap_schedule, flags.power_cap_w ? &*flags.power_cap_w : nullptr);
    if (flags.power_cap_w && schedule.steps().front().cap_w != *flags.power_cap_w) {
      throw usage_error("--power-cap only sets the cap before the first step of --cap-schedule, and this schedule "
                        "starts at 0 s; drop one of them");
    }
    return schedule;
  }
  if (!flags.power_cap_w) throw usage_error("give --power-cap W or --cap-schedule \"T:W,...\"");
  return CapSchedule::constant(*flags.power_cap_w);
}

std::optional<sim::Precision> precision(const RunFlags& flags) {
  if (!flags.precision) return std::nullopt;
  if (*flags.precision == "fp32") return sim::Precision::fp32;
  if (*flags.precision == "fp16") return sim::Precision::fp16;
  throw usage_error(fmt::format("--precision '{}' must be fp32 or fp16", *flags.precision));
}

void print_text(const runtime::SimJobSpec& spec, const sim::Catalog& catalog, const runtime::RunSummary& s) {
  const auto& gpu = catalog.gpu(spec.gpu);
  const auto& model = catalog.model(spec.model);
  fmt::print("gpucap run on the SIMULATED {} (GPU twin, virtual time)\n", gpu.name);
  fmt::print("  model {} ({}), dataset {}, algorithm {}, cap {}, input pipeline {}{}\n", model.id,
             sim::to_string(spec.precision.value_or(model.precision)), catalog.dataset(spec.dataset).id,
             spec.algorithm, spec.schedule.to_string(), sim::to_string(spec.pipeline),
             spec.sim.autotune_new_shapes ? ", autotuning each new batch size" : "");
  const auto line = [](const char* label, const std::string& value) {
    fmt::print("  {:<22} {:>14}  [simulated]\n", label, value);
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

nlohmann::json to_json(const runtime::SimJobSpec& spec, const sim::Catalog& catalog, const runtime::RunSummary& s) {
  return {{"simulated", s.simulated},
          {"gpu", catalog.gpu(spec.gpu).id},
          {"model", catalog.model(spec.model).id},
          {"dataset", catalog.dataset(spec.dataset).id},
          {"algorithm", spec.algorithm},
          {"cap", spec.schedule.to_string()},
          {"input_pipeline", sim::to_string(spec.pipeline)},
          {"autotune_new_shapes", spec.sim.autotune_new_shapes},
          {"seed", spec.sim.seed},
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
          {"max_power_w", s.max_power_w}};
}

}  // namespace

Command add_run_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand("run", "Run one power-capped inference job on the simulated GPU");
  cmd->add_option("--gpu", flags->gpu, "GPU twin (see 'gpucap list gpus')")->capture_default_str();
  cmd->add_option("--model", flags->model, "Model (see 'gpucap list models')")->required();
  cmd->add_option("--dataset", flags->dataset, "Dataset: sets the number of images (see 'gpucap list datasets')")
      ->capture_default_str();
  cmd->add_option("--algorithm", flags->algorithm, "Controller (see 'gpucap list algorithms')")->required();
  cmd->add_option("--power-cap", flags->power_cap_w, "Power cap in W (or the cap before the schedule's first step)");
  cmd->add_option("--cap-schedule", flags->cap_schedule,
                  "Cap steps 'T:W,...' in seconds from the start, e.g. \"0:150,85:125,170:100\"");
  cmd->add_option("--images", flags->images, "Images to process (default: the dataset's size)");
  cmd->add_option("--duration", flags->duration_s,
                  "Stop after this many (virtual) seconds; without --images the image count is then unlimited");
  cmd->add_option("--seed", flags->seed, "Seed of the twin's noise (same seed, same run)")->capture_default_str();
  cmd->add_option("--sample-hz", flags->sample_hz, "Power sampling rate in Hz")->capture_default_str();
  cmd->add_option("--precision", flags->precision, "fp32 or fp16 (default: the model's)");
  cmd->add_option("--input-pipeline", flags->input_pipeline,
                  "Host-side JPEG decode per image (cost from the dataset file): none, serial (decode, then "
                  "compute, as the BatchDVFS harness did) or overlapped")
      ->capture_default_str();
  cmd->add_flag("--autotune-new-shapes", flags->autotune_new_shapes,
                "The engine autotunes each batch size it has not run before (TF1 + cuDNN, PyTorch with "
                "cudnn.benchmark): that batch takes longer, at busy power (cost from the GPU file)");
  cmd->add_option("--bobd-budget", flags->bobd_budget,
                  "bobd: fixed-configuration measurements per cap in its offline search on the twin before the "
                  "run (default 50, as upstream)");
  cmd->add_option("--trace", flags->trace_path, "Write one CSV row per window to this file");
  cmd->add_flag("--json", flags->json, "Print the summary as JSON");
  flags->controller.add_to(*cmd);

  return Command{cmd, [flags, &global] {
                   const auto catalog = sim::Catalog::load(resolve_data_dir(global));
                   runtime::SimJobSpec spec;
                   spec.gpu = flags->gpu;
                   spec.model = flags->model;
                   spec.dataset = flags->dataset;
                   spec.algorithm = flags->algorithm;
                   spec.schedule = cap_schedule(*flags);
                   if (flags->images && (*flags->images < 1 || *flags->images > runtime::kMaxRunImages)) {
                     throw usage_error(
                         fmt::format("--images must be between 1 and {}", runtime::kMaxRunImages));
                   }
                   spec.images = flags->images.value_or(0);
                   if (flags->duration_s && *flags->duration_s <= 0.0) throw usage_error("--duration must be > 0 s");
                   spec.duration_s = flags->duration_s.value_or(0.0);
                   spec.precision = precision(*flags);
                   spec.pipeline = sim::parse_pipeline_mode(flags->input_pipeline);
                   spec.controller = flags->controller.options();
                   spec.sim.seed = parse_seed(flags->seed);
                   spec.sim.sample_hz = flags->sample_hz;
                   spec.sim.autotune_new_shapes = flags->autotune_new_shapes;
                   if (flags->bobd_budget) {
                     if (!control::needs_offline_search(spec.algorithm)) {
                       throw usage_error(fmt::format("--bobd-budget does not apply to {}", spec.algorithm));
                     }
                     if (*flags->bobd_budget < 1 || *flags->bobd_budget > 100'000) {
                       throw usage_error(
                           fmt::format("--bobd-budget {} must be between 1 and 100000", *flags->bobd_budget));
                     }
                     spec.search_budget = static_cast<std::size_t>(*flags->bobd_budget);
                   }

                   runtime::SimJob job(catalog, spec);  // validates before any file is created
                   std::unique_ptr<TraceFile> trace;
                   runtime::TraceSink sink;
                   if (!flags->trace_path.empty()) {
                     trace = std::make_unique<TraceFile>(flags->trace_path);
                     sink = [&trace](const runtime::TraceRow& row) {
                       trace->write(runtime::trace_csv_row(row, /*simulated=*/true));
                     };
                   }
                   const auto summary = job.run(sink);
                   if (flags->json) {
                     std::cout << to_json(spec, catalog, summary).dump(2) << "\n";
                   } else {
                     print_text(spec, catalog, summary);
                     if (trace) fmt::print("  trace                  {}\n", flags->trace_path);
                   }
                 }};
}

}  // namespace gpucap::cli
