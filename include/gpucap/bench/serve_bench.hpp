#pragma once
// The benchmark matrix `serve` (data/matrices/serve.json): KServe-style serving on the twin in
// virtual time, under a power cap that steps down and up, at arrival rates from 30 % to 200 % of
// the GPU's capacity. gpucap's serving controller (capserve) runs against the static setting a
// Triton user picks today, the seeds' controllers under serve, and an oracle: the best static
// setting of each cap segment, found by exhaustive search on the twin (bench/serve_oracle.cpp).
//
// Every run is a fresh twin (SimPlatform) seeded from the cell — the same seed for every
// algorithm of the cell, and the same Poisson arrivals — so the algorithms are compared on the
// same requests and the same noise, and the results depend on neither --jobs nor the scheduling.
// Seeds derive from the names of the GPU, the model and the load, not from their place in the
// matrix: a smaller matrix file (serve-quick.json, a test's) gives the same figures for a cell it
// shares with the full one at the same segment length.

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/serve/simulation.hpp"
#include "gpucap/sim/catalog.hpp"

namespace gpucap::bench {

// ---- The matrix -------------------------------------------------------------------------------

struct ServeModelSpec {
  std::string model;
  sim::Precision precision = sim::Precision::fp32;  // must be the model's (capserve's profile is taken in it)
  std::string note;                                 // why this model
};

struct ServeGpuSpec {
  std::string gpu;
  std::vector<double> caps_w;  // one per segment, each `segment_s` long
  std::string note;            // why these caps
  std::vector<ServeModelSpec> models;
  [[nodiscard]] CapSchedule schedule(double segment_s) const;
};

// What the oracle searches: every batch cap × delay × SM clock (the GPU's DVFS ladder, and the
// GPU's own clock when `gpu_clock`) × memory clock (every one of the GPU's when it has several and
// `memory_clocks`: the knobs capserve and capfit turn), the power limit at the cap.
struct ServeOracleSpace {
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  std::vector<double> delays_s = {0.0, 0.002, 0.005, 0.01, 0.02};
  bool gpu_clock = true;
  bool memory_clocks = true;
};

struct ServeMatrix {
  std::string id;
  std::string description;
  double slo_s = 0.1;
  double segment_s = 60.0;  // each cap holds this long
  double drain_s = 10.0;    // after the last arrival the queue may drain this long
  std::vector<double> loads = {0.3, 0.7, 1.0, 1.5, 2.0};  // fractions of the capacity under the lowest cap
  int model_max_batch_size = 256;  // the batcher's bound (Triton's max_batch_size of the model config)
  int static_max_batch_size = 32;  // the static Triton-style setting (and the seeds' delay)
  double static_max_queue_delay_s = 0.002;
  std::string static_note;
  std::vector<std::string> algorithms;  // capserve, static, and seeds (control/registry names)
  ServeOracleSpace oracle;
  std::vector<ServeGpuSpec> gpus;
};

// Whether a matrix file is a serving matrix ("kind": "serve"); false for the task matrices.
[[nodiscard]] bool is_serve_matrix(const std::string& path);
// Error(io)/Error(invalid_data) naming the file and the key on any problem.
[[nodiscard]] ServeMatrix load_serve_matrix(const std::string& path);
// Names, precisions, caps against the GPUs' ranges, algorithms: Error(usage) naming the first problem.
void validate_serve_matrix(const ServeMatrix& matrix, const sim::Catalog& catalog);

// ---- Static settings (the oracle's, the capacity's) --------------------------------------------

inline constexpr double kAdmitAll = std::numeric_limits<double>::infinity();

struct StaticSetting {
  int batch_cap = 1;
  double delay_s = 0.0;
  std::optional<double> sm_clock_mhz;  // nullopt: the GPU's own clock (its boost governor)
  std::optional<double> memory_clock_mhz;  // nullopt: the driver's default
  double admit_rate_rps = kAdmitAll;   // a token bucket as capserve's shedding; kAdmitAll: none
  // "batch<=32 delay=2ms sm=1140MHz" (+ " mem=5001MHz", " admit=1234/s").
  [[nodiscard]] std::string describe() const;
};

// Every (batch, delay, clock) of the space, in the order the searches try them, admitting all.
[[nodiscard]] std::vector<StaticSetting> oracle_settings(const ServeOracleSpace& space, const sim::GpuSpec& gpu);

// What the simulations of one GPU × model share.
struct ServeTwin {
  const sim::GpuSpec* gpu = nullptr;
  const sim::ModelSpec* model = nullptr;
  sim::Precision precision = sim::Precision::fp32;
  double sample_hz = 100.0;
  double slo_s = 0.1;
  double drain_s = 10.0;
  int model_max_batch_size = 256;
};

// ---- Figures ----------------------------------------------------------------------------------

// One run's figures over one cap segment (requests by arrival, windows by their middle).
struct ServeFigures {
  double start_s = 0.0;
  double end_s = 0.0;
  double cap_w = 0.0;  // NaN for a whole run
  std::uint64_t arrivals = 0;
  std::uint64_t answered = 0;
  std::uint64_t good = 0;
  std::uint64_t shed = 0;
  std::uint64_t refused = 0;
  std::uint64_t failed = 0;
  double goodput_rps = 0.0;
  double slo_attainment = 1.0;
  double p99_s = 0.0;
  double mean_power_w = 0.0;
  double max_power_w = 0.0;
  double energy_j = 0.0;  // Σ window mean power × window length over the segment's windows
  int windows = 0;
  int windows_over_cap = 0;
  int windows_over_cap_outside_transitions = 0;
  std::size_t max_queued_requests = 0;  // at the windows' ends

  [[nodiscard]] double over_cap_pct() const { return windows > 0 ? 100.0 * windows_over_cap / windows : 0.0; }
  [[nodiscard]] double over_cap_outside_pct() const {
    return windows > 0 ? 100.0 * windows_over_cap_outside_transitions / windows : 0.0;
  }
};

// One closed window, for the plots.
struct ServeWindowPoint {
  double end_s = 0.0;
  double cap_w = 0.0;
  double max_power_w = 0.0;
  double p99_s = 0.0;  // the sliding SLO statistics at the window's end
  int batch_cap = 0;
  double sm_clock_mhz = 0.0;  // NaN: unknown
  std::size_t queued_requests = 0;
  bool over_cap = false;
};

struct ServeRun {
  std::string algorithm;
  std::vector<ServeFigures> segments;
  ServeFigures total;
  std::vector<ServeWindowPoint> windows;
};

// Figures of a simulation by segment of `schedule` (its segments; the total over them).
[[nodiscard]] ServeRun serve_run_figures(const std::string& algorithm, const serve::SimulationReport& report);

// ---- Capacity and oracle (bench/serve_oracle.cpp) ----------------------------------------------

// The capacity under a cap: the highest Poisson arrival rate some static setting of the space
// (power limit at the cap, admitting all) serves for `duration_s` with an SLO attainment >= 99 %
// and no window over the cap, found by trying every setting: a setting is tried at 0.5 % above the
// best rate so far and, if it holds there, its own highest rate is found by growing and bisecting
// the rate to 0.5 %. Assumes a setting that fails at a rate fails at every higher rate.
struct ServeCapacity {
  double cap_w = 0.0;
  double capacity_rps = 0.0;  // 0: no setting serves any load under this cap
  StaticSetting setting;      // the one that reaches it
  int settings = 0;           // settings searched
  int simulations = 0;        // simulations run (most stop early, once the setting has failed)
};

struct CapacitySearch {
  double cap_w = 0.0;
  double duration_s = 60.0;
  std::uint64_t arrival_seed = 1;
  std::uint64_t twin_seed = 1;
  double resolution = 0.005;  // relative
};
[[nodiscard]] ServeCapacity find_capacity(const ServeTwin& twin, const std::vector<StaticSetting>& settings,
                                          const CapacitySearch& search);

// The oracle of one cap segment: every setting simulated over the segment's arrivals (shifted to
// start at 0) under its cap alone; among those with an SLO attainment >= 99 % and no window over
// the cap, the most requests within the SLO, ties to the least energy (then to the earlier
// setting). A setting stops early once it has failed (a window over the cap, misses beyond 1 % of
// the arrivals) or can no longer win (fewer possible good requests than the best, or as many and
// more energy already): exact, not a heuristic. When no setting carries the load, the oracle
// sheds: the capacity's setting, admitting the capacity's rate (lowered by 1 % steps until it
// meets the SLO on these arrivals).
struct ServeOracleSegment {
  std::optional<StaticSetting> setting;  // nullopt: nothing meets the SLO and the cap, even shedding
  ServeFigures figures;
  std::vector<ServeWindowPoint> windows;  // times from the segment's start
  bool sheds = false;
  int settings = 0;        // searched
  int stopped_early = 0;   // of them
};

struct OracleSearch {
  double cap_w = 0.0;
  double duration_s = 60.0;
  std::vector<double> arrivals_s;  // from the segment's start
  std::uint64_t twin_seed = 1;
  const ServeCapacity* capacity = nullptr;  // for the shedding fallback; nullptr: none
};
[[nodiscard]] ServeOracleSegment search_oracle_segment(const ServeTwin& twin, const std::vector<StaticSetting>& settings,
                                                       const OracleSearch& search);

// ---- The bench --------------------------------------------------------------------------------

// The seeds of a cell (GPU, model, load): its Poisson arrivals, and the twin every algorithm of
// the cell runs on (the oracle's segment k runs on sim::derive_seed(twin, k + 1)).
struct ServeCellSeeds {
  std::uint64_t arrivals = 0;
  std::uint64_t twin = 0;
};
[[nodiscard]] ServeCellSeeds serve_cell_seeds(std::uint64_t seed, const std::string& gpu, const std::string& model,
                                              double load);

struct ServeBenchOptions {
  std::uint64_t seed = 1;
  int threads = 1;
  double sample_hz = 100.0;
  std::vector<std::string> algorithms;  // empty: the matrix's
  std::function<void(std::size_t done, std::size_t total)> progress;
};

struct ServeCell {
  double load = 0.0;      // fraction of the capacity under the lowest cap
  double rate_rps = 0.0;  // Poisson arrival rate
  std::vector<ServeRun> runs;  // in algorithm order
  std::vector<ServeOracleSegment> oracle;  // one per segment
  [[nodiscard]] const ServeRun* run(const std::string& algorithm) const;
};

struct ServeModelResult {
  std::string gpu;
  std::string model;
  sim::Precision precision = sim::Precision::fp32;
  std::string note;
  CapSchedule schedule = CapSchedule::constant(1.0);
  std::vector<ServeCapacity> capacities;  // one per segment's cap, in schedule order
  std::optional<ServeCapacity> uncapped;  // at the board's highest power limit
  std::vector<ServeCell> cells;           // one per load
  [[nodiscard]] double lowest_cap_capacity_rps() const;
  [[nodiscard]] const ServeCapacity* capacity_at(double cap_w) const;
};

struct ServeBenchReport {
  ServeMatrix matrix;
  std::vector<std::string> algorithms;
  std::uint64_t seed = 1;
  double sample_hz = 100.0;
  std::vector<ServeModelResult> results;  // GPU order, then model order
  int oracle_settings = 0;                // per search (the space's size on the first GPU)
};

// Validates, then runs every cell.
[[nodiscard]] ServeBenchReport run_serve_bench(const ServeMatrix& matrix, const sim::Catalog& catalog,
                                               const ServeBenchOptions& options);

// ---- The checks, from the figures -----------------------------------------------------

// The targets (issue: "Done when"): at `slo_load` capserve's SLO attainment >= 99 % in every
// segment, windows over the cap <= 1 % of the run's, goodput >= 95 % of the oracle's in every
// segment; against the static setting, in every cell and segment, goodput higher where static
// misses the SLO or the cap (equal counts where capserve answered every request of the segment
// within the SLO: nothing is higher) and never more than 2 % lower; at `overload` goodput >= 90 % of the
// capacity under each segment's cap, and the queue bounded by what the GPU serves in one SLO at
// that capacity.
struct ServeTargets {
  double slo_load = 0.7;
  double overload = 2.0;
  double attainment = 0.99;
  double over_cap_pct = 1.0;
  double of_oracle = 0.95;
  double static_margin = 0.02;
  double of_capacity = 0.90;
};

struct ServeCheck {
  std::string gpu;
  std::string model;
  std::string check;     // what is checked
  std::string target;
  std::string measured;  // the numbers
  bool pass = false;
  bool run = true;       // false: the matrix has no such cell (not judged)
};

[[nodiscard]] std::vector<ServeCheck> serve_checks(const ServeBenchReport& report, const ServeTargets& targets = {});

// ---- Output (bench/serve_report.cpp) ----------------------------------------------------------

[[nodiscard]] std::string serve_summary_csv(const ServeBenchReport& report);
[[nodiscard]] nlohmann::json serve_summary_json(const ServeBenchReport& report);
// `command`: the command line that regenerates it; `with_plots`: link plots/.
[[nodiscard]] std::string serve_report_markdown(const ServeBenchReport& report, const std::string& command,
                                                bool with_plots);
// Writes the plots into `dir` (which must exist); Error(unsupported) without gnuplot.
void write_serve_plots(const ServeBenchReport& report, const std::string& dir);
// The plot files write_serve_plots writes for a GPU.
[[nodiscard]] std::string serve_goodput_plot(const std::string& gpu);
[[nodiscard]] std::string serve_p99_plot(const std::string& gpu);
[[nodiscard]] std::string serve_power_plot(const std::string& gpu, const std::string& model, double load);

}  // namespace gpucap::bench
