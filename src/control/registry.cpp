#include "gpucap/control/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpucap/control/batchdvfs.hpp"
#include "gpucap/control/batchsizer.hpp"
#include "gpucap/control/capfit.hpp"
#include "gpucap/control/clipper.hpp"
#include "gpucap/control/directcap.hpp"
#include "gpucap/control/dvfs.hpp"
#include "gpucap/control/morak.hpp"
#include "gpucap/control/mpsfit.hpp"
#include "gpucap/control/pctodl.hpp"
#include "gpucap/control/pctodl_batchdvfs.hpp"
#include "gpucap/control/powercap.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::control {

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> list = {
      {"batchsizer", "binary search of batch size on window max power, band [0.8·cap, cap], every 10 batches",
       "batch", "Nabavinejad et al., ASP-DAC 2021, Algorithm 1",
       "unprivileged (batch size only)"},
      {"batchdvfs", "binary search of batch size 1..255 every 3 s; SM clock one level up/down only at the extremes",
       "batch, SM clock", "Nabavinejad et al., TPDS 2022 (BatchDVFS repository)",
       "--allow-gpu-control (locks the SM clock)"},
      {"dvfs", "fixed batch (256); SM clock one level per 3-s window toward the band", "SM clock",
       "BatchDVFS repository, DVFS baseline",
       "--allow-gpu-control (locks the SM clock)"},
      {"clipper", "AIMD on batch size driven by power: +4 below the band, x0.9 above the cap, every 3 s", "batch",
       "BatchDVFS repository, Clipper-style baseline (Crankshaw et al., NSDI 2017)",
       "unprivileged (batch size only)"},
      {"powercap", "board power limit set to the cap, fixed batch (256), SM clock left to the GPU's boost",
       "power limit", "PctoDL repository, directcap/powercap baseline (nvidia-smi -pl)",
       "--allow-gpu-control (sets the board power limit)"},
      {"morak", "batch and SM clock stepped on window max power, band [0.98·cap, 1.02·cap], latency SLO picks the knob",
       "batch, SM clock (MPS shares fixed)", "PctoDL repository, Morak baseline",
       "--allow-gpu-control (locks the SM clock)"},
      {"pctodl", "MPS tenants, batch sizes and clocks from the greedy partitioner on a predictor; thermodynamic DVFS "
       "controller + FreqGuard every 5 s; asynchronous re-plan on a cap change",
       "MPS shares, batch, SM clock, memory clock", "PctoDL repository (src/main.py), seed-systems.md §2.10",
       "--allow-gpu-control, MPS workers, PctoDL's published fits: an RTX 3080 Ti or A100 and a model file named after one of its models (resnet50.pt, ...)"},
      {"pctodl-batchdvfs", "PctoDL's BatchDVFS: binary search over its batch ladder with SM clock steps of 1 or 4 "
       "clocks every 5 s, band [0.98·cap, cap], from batch 256 at the median clock; FreqGuard",
       "batch, SM clock", "PctoDL repository (src/main.py batchdvfs), seed-systems.md §2.10",
       "--allow-gpu-control (locks the SM clock)"},
      {"directcap", "MPS tenants and batch sizes from the greedy partitioner; board power limit = cap, SM clock left "
       "to boost; memory clock down after 5 windows over 1.02·cap",
       "MPS shares, batch, power limit, memory clock", "PctoDL repository, directcap baseline",
       "--allow-gpu-control (sets the power limit), MPS workers, PctoDL's published fits as pctodl"},
      {"capfit", "gpucap's own: a profile corrected online by its own windows; best predicted feasible point, "
       "margin from the measured spread; reacts to a cap change at once",
       "batch, SM clock, memory clock", "gpucap (docs/algorithms.md)",
       "profiles the GPU first (or --profile); unprivileged it moves the batch size only, with --allow-gpu-control the clocks too"},
      {"mpsfit", "gpucap's own, on MPS: a partition from local search on a predictor fitted to a profile; the SM "
       "clock from that predictor corrected online by its own windows, margin from the measured spread; re-plans at "
       "once on a cap change",
       "MPS shares, batch, SM clock, memory clock", "gpucap (docs/algorithms.md)",
       "--allow-gpu-control, MPS workers, --fitted (gpucap profile --platform nvml, then gpucap fit)"},
      {"bobd", "offline Bayesian optimisation (GP, constrained EI, 50 fixed-configuration measurements) for each cap "
       "before the job; then the configuration found for the cap in force, switched at once on a cap change",
       "batch, SM clock, memory clock", "Nabavinejad et al., BOBD (BatchDVFS repository, Spearmint)",
       "searches each cap on the GPU first; unprivileged over batch sizes only, with --allow-gpu-control over clocks too"},
  };
  return list;
}

namespace {

double checked_alpha(const ControllerOptions& options, double fallback) {
  const double alpha = options.alpha.value_or(fallback);
  if (!(alpha > 0.0 && alpha <= 1.0)) throw usage_error(fmt::format("--alpha {:g} must be in (0, 1]", alpha));
  return alpha;
}

DecisionPeriod checked_period(const ControllerOptions& options, DecisionPeriod fallback) {
  const auto period = options.window.value_or(fallback);
  const bool by_batches = period.batches > 0;
  if (by_batches ? period.batches > 1'000'000 : !(period.seconds > 0.0 && period.seconds <= kMaxWindowS)) {
    throw usage_error(fmt::format("window {} is out of range (0 to {:g} s, or 1 to 1000000 batches)",
                                  period.to_string(), kMaxWindowS));
  }
  return period;
}

std::vector<int> checked_batch_sizes(const ControllerOptions& options, std::vector<int> fallback) {
  auto sizes = options.batch_sizes.value_or(std::move(fallback));
  if (sizes.empty()) throw usage_error("batch size set is empty");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1 || sizes[i] > 1'000'000) {
      throw usage_error(fmt::format("batch size {} must be between 1 and 1000000", sizes[i]));
    }
    if (i > 0 && sizes[i] <= sizes[i - 1]) throw usage_error("batch sizes must be strictly increasing");
  }
  return sizes;
}

std::vector<double> checked_clock_levels(const ControllerOptions& options, const PlatformLimits& limits) {
  auto levels = options.clock_levels_mhz.value_or(limits.dvfs_levels_mhz);
  if (levels.empty()) throw usage_error("clock level list is empty");
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (i > 0 && levels[i] <= levels[i - 1]) throw usage_error("clock levels must be strictly increasing");
    const auto& supported = limits.supported_sm_clocks_mhz;
    if (!supported.empty() && std::none_of(supported.begin(), supported.end(),
                                           [&](double c) { return std::abs(c - levels[i]) < 0.5; })) {
      throw usage_error(fmt::format("clock level {:g} MHz is not a supported SM clock of this GPU", levels[i]));
    }
  }
  return levels;
}

int checked_fixed_batch(const ControllerOptions& options, int fallback) {
  const int batch = options.fixed_batch.value_or(fallback);
  if (batch < 1 || batch > 1'000'000) throw usage_error(fmt::format("--batch {} must be between 1 and 1000000", batch));
  return batch;
}

int index_of_batch(const std::vector<int>& sizes, int batch) {
  const auto it = std::find(sizes.begin(), sizes.end(), batch);
  if (it == sizes.end()) throw usage_error(fmt::format("--start-batch {} is not in the batch size set", batch));
  return static_cast<int>(it - sizes.begin());
}

int index_of_clock(const std::vector<double>& levels, double mhz) {
  const auto it = std::find_if(levels.begin(), levels.end(), [mhz](double l) { return std::abs(l - mhz) < 0.5; });
  if (it == levels.end()) throw usage_error(fmt::format("--start-clock {:g} MHz is not one of the clock levels", mhz));
  return static_cast<int>(it - levels.begin());
}

// The seeds start at level 5 of ten (1063 MHz on the P40): the middle of the ladder.
int default_start_clock_index(const std::vector<double>& levels) {
  return std::min(5, static_cast<int>(levels.size()) - 1);
}

int start_clock_index(const ControllerOptions& options, const std::vector<double>& levels) {
  return options.start_clock_mhz ? index_of_clock(levels, *options.start_clock_mhz)
                                 : default_start_clock_index(levels);
}

void reject(bool present, std::string_view option, std::string_view algorithm) {
  if (present) throw usage_error(fmt::format("{} does not apply to {}", option, algorithm));
}

std::unique_ptr<Controller> make_batchsizer(const ControllerOptions& o) {
  reject(o.clock_levels_mhz.has_value(), "--clock-levels", "batchsizer (batch size only)");
  reject(o.start_clock_mhz.has_value(), "--start-clock", "batchsizer (batch size only)");
  reject(o.fixed_batch.has_value(), "--batch", "batchsizer");
  BatchSizerParams p;
  p.alpha = checked_alpha(o, p.alpha);
  p.period = checked_period(o, p.period);
  p.batch_sizes = checked_batch_sizes(o, p.batch_sizes);
  p.start_index = o.start_batch ? index_of_batch(p.batch_sizes, *o.start_batch) : 0;
  return std::make_unique<BatchSizerController>(std::move(p));
}

std::unique_ptr<Controller> make_batchdvfs(const ControllerOptions& o, const PlatformLimits& limits) {
  reject(o.fixed_batch.has_value(), "--batch", "batchdvfs");
  BatchDvfsParams p;
  p.alpha = checked_alpha(o, p.alpha);
  p.period = checked_period(o, p.period);
  p.batch_sizes = checked_batch_sizes(o, p.batch_sizes);
  p.clock_levels_mhz = checked_clock_levels(o, limits);
  p.start_batch_index = o.start_batch ? index_of_batch(p.batch_sizes, *o.start_batch) : 0;
  p.start_clock_index = start_clock_index(o, p.clock_levels_mhz);
  return std::make_unique<BatchDvfsController>(std::move(p));
}

std::unique_ptr<Controller> make_dvfs(const ControllerOptions& o, const PlatformLimits& limits) {
  reject(o.batch_sizes.has_value(), "--batch-sizes", "dvfs (fixed batch; use --batch)");
  reject(o.start_batch.has_value(), "--start-batch", "dvfs (fixed batch; use --batch)");
  DvfsParams p;
  p.alpha = checked_alpha(o, p.alpha);
  p.period = checked_period(o, p.period);
  p.batch_size = checked_fixed_batch(o, p.batch_size);
  p.clock_levels_mhz = checked_clock_levels(o, limits);
  p.start_clock_index = start_clock_index(o, p.clock_levels_mhz);
  return std::make_unique<DvfsController>(std::move(p));
}

std::unique_ptr<Controller> make_clipper(const ControllerOptions& o) {
  reject(o.clock_levels_mhz.has_value(), "--clock-levels", "clipper (clocks stay with the GPU)");
  reject(o.start_clock_mhz.has_value(), "--start-clock", "clipper (clocks stay with the GPU)");
  reject(o.fixed_batch.has_value(), "--batch", "clipper");
  ClipperParams p;
  p.alpha = checked_alpha(o, p.alpha);
  p.period = checked_period(o, p.period);
  p.batch_sizes = checked_batch_sizes(o, p.batch_sizes);
  p.start_index = o.start_batch ? index_of_batch(p.batch_sizes, *o.start_batch) : 0;
  return std::make_unique<ClipperController>(std::move(p));
}

std::unique_ptr<Controller> make_powercap(const ControllerOptions& o, const PlatformLimits& limits) {
  reject(o.alpha.has_value(), "--alpha", "powercap (the firmware holds the limit)");
  reject(o.batch_sizes.has_value(), "--batch-sizes", "powercap (fixed batch; use --batch)");
  reject(o.start_batch.has_value(), "--start-batch", "powercap (fixed batch; use --batch)");
  reject(o.clock_levels_mhz.has_value(), "--clock-levels", "powercap (clocks stay with the GPU)");
  reject(o.start_clock_mhz.has_value(), "--start-clock", "powercap (clocks stay with the GPU)");
  PowercapParams p;
  p.period = checked_period(o, p.period);
  p.batch_size = checked_fixed_batch(o, p.batch_size);
  p.power_limit_min_w = limits.power_limit_min_w;
  p.power_limit_max_w = limits.power_limit_max_w;
  return std::make_unique<PowercapController>(p);
}

std::vector<double> checked_mps_shares(const std::vector<double>& shares) {
  if (shares.empty()) throw usage_error("--mps-shares needs at least one share");
  double total = 0.0;
  for (const double share : shares) {
    if (!(share >= 5.0 && share <= 100.0) || std::fmod(share, 5.0) != 0.0) {
      throw usage_error(fmt::format("MPS share {:g} % must be a multiple of 5 in [5, 100]", share));
    }
    total += share;
  }
  if (total > 100.0) throw usage_error(fmt::format("MPS shares add up to {:g} %, more than 100 %", total));
  return shares;
}

// PctoDL's baselines (morak, pctodl-batchdvfs) step through every supported SM clock (15-MHz
// steps), not the DVFS ladder.
std::vector<double> pctodl_clocks(const ControllerOptions& o, const PlatformLimits& limits) {
  if (o.clock_levels_mhz || limits.supported_sm_clocks_mhz.empty()) return checked_clock_levels(o, limits);
  return limits.supported_sm_clocks_mhz;
}

// The index of `batch` in the ladder, or of the largest size below it.
int batch_index_at_most(const std::vector<int>& sizes, int batch) {
  const auto above = std::upper_bound(sizes.begin(), sizes.end(), batch);
  return static_cast<int>(std::max<std::ptrdiff_t>(above - sizes.begin() - 1, 0));
}

std::unique_ptr<Controller> make_pctodl_batchdvfs(const ControllerOptions& o, const PlatformLimits& limits) {
  reject(o.fixed_batch.has_value(), "--batch", "pctodl-batchdvfs");
  PctodlBatchDvfsParams p;
  p.alpha = checked_alpha(o, p.alpha);
  p.period = checked_period(o, p.period);
  p.batch_sizes = checked_batch_sizes(o, pctodl_batch_ladder());
  p.clocks_mhz = pctodl_clocks(o, limits);
  // Upstream starts every worker at batch 256 and the median of the platform's clock list.
  p.start_batch_index = o.start_batch ? index_of_batch(p.batch_sizes, *o.start_batch)
                                      : batch_index_at_most(p.batch_sizes, 256);
  p.start_clock_index = o.start_clock_mhz ? index_of_clock(p.clocks_mhz, *o.start_clock_mhz)
                                          : static_cast<int>(p.clocks_mhz.size() / 2);
  return std::make_unique<PctodlBatchDvfsController>(std::move(p));
}

std::unique_ptr<Controller> make_morak(const ControllerOptions& o, const PlatformLimits& limits) {
  reject(o.fixed_batch.has_value(), "--batch", "morak");
  MorakParams p;
  p.alpha = checked_alpha(o, p.alpha);
  p.period = checked_period(o, p.period);
  p.batch_sizes = checked_batch_sizes(o, p.batch_sizes);
  p.clocks_mhz = pctodl_clocks(o, limits);
  if (o.latency_slo_ms && !(*o.latency_slo_ms > 0.0 && *o.latency_slo_ms <= 1e7)) {
    throw usage_error(fmt::format("--slo-ms {:g} must be a positive number of milliseconds", *o.latency_slo_ms));
  }
  p.latency_slo_ms = o.latency_slo_ms;
  // Upstream starts at batch 96 and the median clock.
  const auto& sizes = p.batch_sizes;
  const auto start = std::lower_bound(sizes.begin(), sizes.end(), 96);
  p.start_batch_index = o.start_batch ? index_of_batch(sizes, *o.start_batch)
                                      : static_cast<int>(std::min(start - sizes.begin(),
                                                                  static_cast<std::ptrdiff_t>(sizes.size()) - 1));
  p.start_clock_index = o.start_clock_mhz ? index_of_clock(p.clocks_mhz, *o.start_clock_mhz)
                                          : static_cast<int>(p.clocks_mhz.size() / 2);
  if (o.mps_shares_pct) p.shares_pct = checked_mps_shares(*o.mps_shares_pct);
  return std::make_unique<MorakController>(std::move(p));
}

// For algorithms that choose batch sizes and clocks themselves (a search or a partitioner).
void reject_batch_and_clock_options(const ControllerOptions& o, const char* why) {
  reject(o.alpha.has_value(), "--alpha", why);
  reject(o.fixed_batch.has_value(), "--batch", why);
  reject(o.batch_sizes.has_value(), "--batch-sizes", why);
  reject(o.start_batch.has_value(), "--start-batch", why);
  reject(o.start_clock_mhz.has_value(), "--start-clock", why);
  reject(o.clock_levels_mhz.has_value(), "--clock-levels", why);
}

std::unique_ptr<Controller> make_pctodl(const ControllerOptions& o) {
  constexpr const char* kWhy = "pctodl (its partitioner and DVFS controller set batch and clocks)";
  reject_batch_and_clock_options(o, kWhy);
  PctodlParams p;
  p.period = checked_period(o, p.period);
  p.planning = o.mps_planning;
  p.shadow = o.shadow;
  return std::make_unique<PctodlController>(std::move(p));
}

std::unique_ptr<Controller> make_directcap(const ControllerOptions& o, const PlatformLimits& limits) {
  constexpr const char* kWhy = "directcap (its partitioner sets batch sizes; the GPU sets the clock)";
  reject_batch_and_clock_options(o, kWhy);
  DirectcapParams p;
  p.period = checked_period(o, p.period);
  p.planning = o.mps_planning;
  p.power_limit_min_w = limits.power_limit_min_w;
  p.power_limit_max_w = limits.power_limit_max_w;
  return std::make_unique<DirectcapController>(std::move(p));
}

std::unique_ptr<Controller> make_mpsfit(const ControllerOptions& o) {
  constexpr const char* kWhy = "mpsfit (its partitioner and feedback set batch and clocks)";
  reject_batch_and_clock_options(o, kWhy);
  MpsfitParams p;
  p.period = checked_period(o, p.period);
  p.planning = o.mps_planning;
  return std::make_unique<MpsfitController>(std::move(p));
}

std::unique_ptr<Controller> make_capfit(const ControllerOptions& o) {
  reject(o.alpha.has_value(), "--alpha", "capfit (its margin comes from the measured spread)");
  reject(o.fixed_batch.has_value(), "--batch", "capfit");
  reject(o.start_batch.has_value(), "--start-batch", "capfit (it starts at the profile's best point)");
  reject(o.start_clock_mhz.has_value(), "--start-clock", "capfit (it starts at the profile's best point)");
  reject(o.clock_levels_mhz.has_value(), "--clock-levels", "capfit (it uses the profile's clocks)");
  CapfitParams p;
  p.period = checked_period(o, p.period);
  if (o.batch_sizes) p.batch_sizes = checked_batch_sizes(o, {});
  p.profile = o.profile;
  p.lock_clocks = !o.gpu_chooses_clocks;
  return std::make_unique<CapfitController>(std::move(p));
}

std::unique_ptr<Controller> make_bobd(const ControllerOptions& o) {
  constexpr const char* kWhy = "bobd (its offline search sets batch and clocks)";
  reject_batch_and_clock_options(o, kWhy);
  TunedParams p;
  p.period = checked_period(o, p.period);
  p.table = o.tuned_table;
  return std::make_unique<TunedController>(std::move(p));
}

}  // namespace

bool needs_offline_search(std::string_view algorithm) { return to_lower(trim(algorithm)) == "bobd"; }

bool needs_profile(std::string_view algorithm) { return to_lower(trim(algorithm)) == "capfit"; }

bool needs_mps_planning(std::string_view algorithm) {
  const auto key = to_lower(trim(algorithm));
  return key == "pctodl" || key == "directcap" || key == "mpsfit";
}

bool pctodl_suite_only(std::string_view algorithm) {
  return needs_mps_planning(algorithm) || to_lower(trim(algorithm)) == "pctodl-batchdvfs";
}

bool plans_with_fitted_predictor(std::string_view algorithm) { return to_lower(trim(algorithm)) == "mpsfit"; }

bool uses_power_band(std::string_view algorithm) {
  const auto key = to_lower(trim(algorithm));
  return key != "capfit" && key != "powercap" && key != "bobd" && key != "pctodl" && key != "directcap" &&
         key != "mpsfit";
}

std::unique_ptr<Controller> make_controller(std::string_view name, const ControllerOptions& options,
                                            const PlatformLimits& limits) {
  const auto key = to_lower(trim(name));
  reject(options.profile && key != "capfit", "--profile", fmt::format("{} (only capfit runs from a profile)", name));
  reject(options.tuned_table && key != "bobd", "a tuned table", fmt::format("{} (only bobd runs from one)", name));
  reject(options.latency_slo_ms && key != "morak", "--slo-ms", fmt::format("{} (only morak has a latency SLO)", name));
  reject(options.shadow && key != "pctodl", "--shadow", fmt::format("{} (only pctodl has a shadow optimizer)", name));
  reject(options.mps_shares_pct && key != "morak", "--mps-shares",
         fmt::format("{} (only morak runs fixed MPS shares)", name));
  reject(options.mps_planning && !needs_mps_planning(key), "a partition planner",
         fmt::format("{} (only pctodl, directcap and mpsfit plan MPS partitions)", name));
  if (key == "batchsizer") return make_batchsizer(options);
  if (key == "batchdvfs") return make_batchdvfs(options, limits);
  if (key == "dvfs") return make_dvfs(options, limits);
  if (key == "clipper") return make_clipper(options);
  if (key == "powercap") return make_powercap(options, limits);
  if (key == "morak") return make_morak(options, limits);
  if (key == "pctodl-batchdvfs") return make_pctodl_batchdvfs(options, limits);
  if (key == "capfit") return make_capfit(options);
  if (key == "bobd") return make_bobd(options);
  if (key == "pctodl") return make_pctodl(options);
  if (key == "directcap") return make_directcap(options, limits);
  if (key == "mpsfit") return make_mpsfit(options);
  std::vector<std::string> names;
  for (const auto& info : algorithms()) names.push_back(info.name);
  throw usage_error(fmt::format("unknown algorithm '{}'; known: {}", name, join(names, ", ")));
}

std::vector<int> parse_batch_sizes(std::string_view text) {
  const auto trimmed = trim(text);
  if (const auto dots = trimmed.find(".."); dots != std::string_view::npos) {
    const auto first = parse_integer(trimmed.substr(0, dots));
    const auto last = parse_integer(trimmed.substr(dots + 2));
    if (!first || !last || *first < 1 || *last < *first || *last > 1'000'000) {
      throw usage_error(fmt::format("batch range '{}' must be FIRST..LAST with 1 <= FIRST <= LAST", text));
    }
    std::vector<int> sizes;
    for (auto b = *first; b <= *last; ++b) sizes.push_back(static_cast<int>(b));
    return sizes;
  }
  std::vector<int> sizes;
  for (const auto item : split(trimmed, ',')) {
    const auto value = parse_integer(item);
    if (!value || *value < 1 || *value > 1'000'000) {
      throw usage_error(fmt::format("batch size '{}' in '{}' is not a positive integer", trim(item), text));
    }
    sizes.push_back(static_cast<int>(*value));
  }
  return sizes;
}

std::vector<double> parse_clock_levels(std::string_view text) {
  std::vector<double> levels;
  for (const auto item : split(trim(text), ',')) {
    const auto value = parse_double(item);
    if (!value || *value <= 0.0) {
      throw usage_error(fmt::format("clock level '{}' in '{}' is not a positive number of MHz", trim(item), text));
    }
    levels.push_back(*value);
  }
  return levels;
}

}  // namespace gpucap::control
