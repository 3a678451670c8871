#pragma once
// `gpucap calibrate` and `gpucap fidelity` as library calls: the calibration problems of each
// data source, fitting them from the hand estimates, and measuring the twin's error on data that
// was not fitted.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpucap/calibrate/fit.hpp"
#include "gpucap/calibrate/model.hpp"
#include "gpucap/calibrate/p40_emulation.hpp"
#include "gpucap/calibrate/p40_runs.hpp"

namespace gpucap::calibrate {

enum class Source { p40, pctodl, published };

[[nodiscard]] const char* to_string(Source source);
// "p40,pctodl,published" or "all"; Error(usage).
[[nodiscard]] std::vector<Source> parse_sources(const std::string& text);

struct SourcePaths {
  std::string p40_logs;       // folder in the batchdvfs-p40 layout
  std::string pctodl_params;  // folder in the format of ../shared/data/pctodl
  std::string published;      // data/calibration/published.json
};

struct Problem {
  Source source = Source::p40;
  std::vector<Observation> observations;  // all of them
  std::vector<Observation> fitted;        // the ones a calibration fits (all but "check" curves)
  std::vector<FitParameter> parameters;
  FitOptions options;
};

[[nodiscard]] Problem build_problem(Source source, const sim::Catalog& catalog, const SourcePaths& paths);

// `current` with the given parameters put back at their priors (the files' "_prior").
[[nodiscard]] TwinParams at_priors(const TwinParams& current, const sim::Catalog& catalog,
                                   const std::vector<FitParameter>& parameters);

struct SourceFit {
  Source source = Source::p40;
  FitResult result;
  std::vector<FitParameter> parameters;
  TwinParams start;
};

// Fits each source in order, each from its priors and on top of the sources before it.
[[nodiscard]] std::vector<SourceFit> calibrate_sources(const sim::Catalog& catalog, const std::vector<Source>& sources,
                                                       const SourcePaths& paths);

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

struct FidelityReport {
  std::vector<FidelityRow> rows;
  std::vector<P40RunTime> p40_run_times;
  std::vector<P40RunFidelity> p40_runs;
  std::map<std::string, std::vector<EmulatedRow>> p40_emulated;  // by run name, for plots
  std::vector<P40Run> p40_data;
  bool p40_cross_validated = true;  // false: evaluated with the current data files (--p40-logs)
  ErrorStats p40_power;             // the headline: per-step window-max power
};

struct FidelityOptions {
  std::vector<Source> sources = {Source::p40, Source::pctodl, Source::published};
  SourcePaths paths;
  bool p40_cross_validate = true;  // leave-one-job-out fits; false: the current data files
  HarnessParams harness;
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
