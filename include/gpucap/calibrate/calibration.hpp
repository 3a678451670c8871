#pragma once
// `gpucap calibrate` and `gpucap fidelity` as library calls: the calibration problems of each
// data source, fitting them from the hand estimates, and measuring the twin's error on data that
// was not fitted.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpucap/calibrate/fit.hpp"
#include "gpucap/calibrate/model.hpp"
#include "gpucap/calibrate/p40_emulation.hpp"
#include "gpucap/calibrate/p40_runs.hpp"
#include "gpucap/calibrate/real_source.hpp"
#include "gpucap/calibrate/zeus_source.hpp"

namespace gpucap::calibrate {

enum class Source { p40, pctodl, published, zeus, real };

// Told what a long calibration or fidelity run is doing, one stage at a time ("zeus: fitting 84
// parameters to 1,018 residuals"), so that the CLI can show progress; may be empty.
using ProgressSink = std::function<void(const std::string& stage)>;

[[nodiscard]] const char* to_string(Source source);
// "p40,pctodl,published,zeus,real" or "all"; Error(usage).
[[nodiscard]] std::vector<Source> parse_sources(const std::string& text);

struct SourcePaths {
  std::string p40_logs;       // folder in the batchdvfs-p40 layout
  std::string pctodl_params;  // folder in the format of ../shared/data/pctodl
  std::string published;      // data/calibration/published.json
  std::string zeus_traces;    // folder of summary_power_<gpu>.csv (../shared/data/zeus/nsdi23)
  std::string zeus_setup;     // data/calibration/zeus.json
  std::string real_sweeps;    // data/calibration/real.json: measurement folders of real-GPU sweeps
};

// Where each source's data lies by default: the shared reference data (`shared_dir`, e.g.
// ../shared/data) and the twin's data directory.
[[nodiscard]] SourcePaths default_source_paths(const std::string& data_dir, const std::string& shared_dir);

struct Problem {
  Source source = Source::p40;
  std::vector<Observation> observations;  // all of them
  std::vector<Observation> fitted;        // the ones a calibration fits (all but "check" curves)
  std::vector<FitParameter> parameters;
  FitOptions options;
  // Keys set from the fitted values rather than fitted (Zeus: the GPUs no trace fits), and how:
  // `derive` runs on the fit's result. Empty and null for the other sources.
  std::vector<FitParameter> derived;
  std::function<void(TwinParams&)> derive;
};

[[nodiscard]] Problem build_problem(Source source, const sim::Catalog& catalog, const SourcePaths& paths);

// `current` with the given parameters put back at their priors (the files' "_prior").
[[nodiscard]] TwinParams at_priors(const TwinParams& current, const sim::Catalog& catalog,
                                   const std::vector<FitParameter>& parameters);

struct SourceFit {
  Source source = Source::p40;
  FitResult result;  // its params hold the derived keys too
  std::vector<FitParameter> parameters;
  std::vector<FitParameter> derived;  // Problem::derived
  TwinParams start;  // at the priors of both
};

// Fits a problem from `start` and sets its derived keys from the result.
[[nodiscard]] FitResult fit_problem(const Problem& problem, const TwinParams& start);

// Fits each source in order, each from its priors and on top of the sources before it. Every
// source's data is read and checked before the first fit starts, so a missing or malformed input
// fails at once rather than after minutes of fitting.
[[nodiscard]] std::vector<SourceFit> calibrate_sources(const sim::Catalog& catalog, const std::vector<Source>& sources,
                                                       const SourcePaths& paths, const ProgressSink& progress = {});

// Error statistics of a set of relative errors.
struct ErrorStats {
  std::size_t n = 0;
  double median_ape = 0.0;  // percent
  double p90_ape = 0.0;
  double mape = 0.0;
};
[[nodiscard]] ErrorStats error_stats(std::vector<double> absolute_relative_errors);
// |predicted − measured| / |measured|: the absolute relative error every row is made of.
[[nodiscard]] double ape(double predicted, double measured);

struct FidelityRow {
  std::string source;    // "p40", "pctodl-rtx3080ti", ...
  std::string quantity;  // "window_max_power_w", "window_mean_power_w", "throughput_img_s", "power_w", ...
  std::string split;     // how the data was held out
  ErrorStats stats;
  std::optional<double> target_median_pct;
  std::optional<double> target_p90_pct;
  std::optional<double> target_mape_pct;
};

struct P40RunFidelity {
  std::string run;
  ErrorStats power;
  ErrorStats floor;  // the log against itself: consecutive steps at one batch and clock
};

// One whole BatchDVFS job: the wall time its harness logged and the twin's.
struct P40RunTime {
  int job = 0;
  std::string model;
  std::string approach;  // batchdvfs, clipper, dvfs256
  double logged_s = 0.0;
  double twin_s = 0.0;
};

// The twin against one Zeus power trace (summary_power_<gpu>.csv): every row of a workload the
// twin can run, under the row's batch size and power limit.
struct ZeusTracePoint {
  bench::ZeusPowerRow row;
  sim::TrainingPoint twin;
};

struct ZeusTraceFidelity {
  std::string trace_gpu;  // from the file name
  std::string twin_gpu;   // the catalogue's id
  std::string split;      // "in-sample", "held out", or "" for a trace outside calibration
  std::vector<ZeusTracePoint> points;
  std::vector<std::string> skipped_workloads;  // "dataset/network" the twin has no mapping for
  std::size_t skipped_rows = 0;
  ErrorStats time;
  ErrorStats power;
  double real_excess_w = 0.0;  // the most a measured average power exceeded its limit (0: never)
  double twin_excess_w = 0.0;  // the same for the twin
  // The trace against itself: where a configuration's average power stays under 80 % of its limit
  // at three limits or more, the limit cannot matter, so each such row's distance from the median
  // of its (workload, optimizer, batch size) is measurement noise.
  ErrorStats time_floor;
  ErrorStats power_floor;
};

// Error(io/invalid_data) for a bad trace, Error(usage) when no twin GPU takes its limits or none of
// its workloads is mapped.
[[nodiscard]] ZeusTraceFidelity compare_zeus_trace(const TwinParams& params, const sim::Catalog& catalog,
                                                   const ZeusSetup& setup, const std::string& trace_csv,
                                                   const std::optional<std::string>& gpu = std::nullopt);
// A table per workload and the last line
// "zeus power-limit curves: time MAPE X% power MAPE Y% (N configs)".
[[nodiscard]] std::string zeus_trace_text(const ZeusTraceFidelity& fidelity);
// One row per configuration: the trace's figures beside the twin's (and the clock it ran at).
[[nodiscard]] std::string zeus_trace_csv(const ZeusTraceFidelity& fidelity);
// The Markdown section of docs/fidelity.md on the Zeus traces (empty without any).
[[nodiscard]] std::string zeus_markdown(const std::vector<ZeusTraceFidelity>& traces);
// One SVG per (trace, workload) in `dir` (gnuplot): time per epoch and average power against the
// power limit, measured points and the twin's lines, at up to four batch sizes.
void write_zeus_plots(const std::vector<ZeusTraceFidelity>& traces, const std::string& dir);
// The zeus source fitted from its priors on its "fit" traces, then every trace of the setup
// compared (the "check" ones held out).
[[nodiscard]] std::vector<ZeusTraceFidelity> zeus_source_fidelity(const sim::Catalog& catalog, const SourcePaths& paths,
                                                                  const TwinParams& current);

struct FidelityReport {
  std::vector<ZeusTraceFidelity> zeus;  // one per trace of the zeus source
  std::vector<FidelityRow> rows;
  std::vector<P40RunTime> p40_run_times;
  std::vector<P40RunFidelity> p40_runs;
  std::map<std::string, std::vector<EmulatedRow>> p40_emulated;  // by run name, for plots
  std::vector<P40Run> p40_data;
  bool p40_cross_validated = true;  // false: evaluated with the current data files (--p40-logs)
  ErrorStats p40_power;             // the headline: per-step window-max power
  std::vector<RealPointFidelity> real;  // every real-GPU sweep point, the twin fitted on the "fit" folders
};

struct FidelityOptions {
  std::vector<Source> sources = {Source::p40, Source::pctodl, Source::published, Source::zeus};
  SourcePaths paths;
  bool p40_cross_validate = true;  // leave-one-job-out fits; false: the current data files
  HarnessParams harness;
  ProgressSink progress;  // a line per source, and per left-out P40 job
};

[[nodiscard]] FidelityReport measure_fidelity(const sim::Catalog& catalog, const FidelityOptions& options);

[[nodiscard]] std::string fidelity_text(const FidelityReport& report);
[[nodiscard]] nlohmann::json fidelity_json(const FidelityReport& report);
// The whole of docs/fidelity.md: method, results, the P40's qualitative facts, the calibrated
// parameters (prior → current) of `catalog`.
[[nodiscard]] std::string fidelity_markdown(const FidelityReport& report, const sim::Catalog& catalog,
                                            const std::string& command);

// One SVG per P40 run in `dir` (via gnuplot): logged window maxima, the twin's prediction and
// the cap over time. Error(unsupported) if gnuplot is not installed, Error(io) if `dir` cannot
// be written.
void write_p40_plots(const FidelityReport& report, const std::string& dir);

}  // namespace gpucap::calibrate
