#include "gpucap/bench/bso_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>

#include "gpucap/bench/zeus_trace.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/gnuplot.hpp"

namespace gpucap::bench {
namespace {

constexpr int kLateFirst = 40;
constexpr int kLateLast = 50;
constexpr double kNearFraction = 0.05;

// The batch sizes whose expected cost (at their best limit) is within 5 % of the optimum.
std::vector<int> near_optimal_sizes(const bso::TraceWorkload& w, const bso::TraceOptimum& optimum, double eta) {
  std::vector<int> sizes;
  for (const int b : w.batch_sizes) {
    for (const auto& [limit, point] : w.power.at(b)) {
      const auto cost = bso::expected_cost(w, b, limit, eta);
      if (cost && *cost <= optimum.cost * (1.0 + kNearFraction)) {
        sizes.push_back(b);
        break;
      }
    }
  }
  return sizes;
}

std::optional<int> settle_within(const bso::SimResult& result, const std::vector<int>& sizes) {
  std::optional<int> settled;
  for (int r = static_cast<int>(result.recurrences.size()); r >= 1; --r) {
    const auto& tries = result.recurrences[static_cast<std::size_t>(r - 1)].tries;
    const bool only = std::all_of(tries.begin(), tries.end(), [&](const bso::SimTry& t) {
      return std::find(sizes.begin(), sizes.end(), t.batch_size) != sizes.end();
    });
    if (!only) break;
    settled = r;
  }
  return settled;
}

BsoSeedResult reduce(const bso::SimResult& result, std::uint64_t seed, const std::vector<int>& near) {
  BsoSeedResult out;
  out.seed = seed;
  out.regret_in_optimum_costs = result.regret_in_optimum_costs();
  double sum = 0.0;
  for (const auto& r : result.recurrences) {
    sum += (r.cost - result.optimum.cost) / result.optimum.cost;
    out.cumulative_regret.push_back(sum);
  }
  out.settle = bso::settle_recurrence(result, result.optimum.batch_size);
  out.settle_near = settle_within(result, near);
  out.late_cost = bso::late_cost_fraction(result, kLateFirst, kLateLast);
  int on_optimum = 0, late = 0;
  for (int r = kLateFirst; r <= std::min<int>(kLateLast, static_cast<int>(result.recurrences.size())); ++r) {
    const auto& tries = result.recurrences[static_cast<std::size_t>(r - 1)].tries;
    ++late;
    on_optimum += std::all_of(tries.begin(), tries.end(),
                              [&](const bso::SimTry& t) { return t.batch_size == result.optimum.batch_size; });
  }
  out.late_share_on_optimum = late > 0 ? static_cast<double>(on_optimum) / late : 0.0;
  return out;
}

std::string settle_text(const std::optional<int>& r) { return r ? std::to_string(*r) : "never"; }

std::string per_seed(const BsoBenchRow& row) {
  std::vector<std::string> parts;
  for (const auto& s : row.seeds) parts.push_back(fmt::format("{:.2f}", s.regret_in_optimum_costs));
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string settles(const BsoBenchRow& row, bool near) {
  std::vector<std::string> parts;
  for (const auto& s : row.seeds) parts.push_back(settle_text(near ? s.settle_near : s.settle));
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string late_cost_text(const BsoBenchRow& row) {
  std::vector<double> values;
  for (const auto& s : row.seeds) {
    if (s.late_cost) values.push_back(*s.late_cost * 100.0);
  }
  if (values.empty()) return "—";
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return fmt::format("{:.1f} [{:.1f}, {:.1f}]", mean, *lo, *hi);
}

double late_share(const BsoBenchRow& row) {
  double sum = 0.0;
  for (const auto& s : row.seeds) sum += s.late_share_on_optimum;
  return row.seeds.empty() ? 0.0 : sum / static_cast<double>(row.seeds.size());
}

}  // namespace

double BsoBenchRow::mean_regret() const {
  double sum = 0.0;
  for (const auto& s : seeds) sum += s.regret_in_optimum_costs;
  return seeds.empty() ? 0.0 : sum / static_cast<double>(seeds.size());
}

const BsoBenchRow* BsoBenchReport::find(const std::string& workload, bso::OptimizerKind optimizer) const {
  for (const auto& row : rows) {
    if (row.workload == workload && row.optimizer == optimizer) return &row;
  }
  return nullptr;
}

BsoBenchReport run_bso_bench(const BsoBenchOptions& options) {
  if (options.seeds.empty()) throw usage_error("bso bench needs at least one seed");
  if (options.optimizers.empty()) throw usage_error("bso bench needs at least one optimizer");
  BsoBenchReport report;
  report.options = options;
  std::vector<std::string> names = options.workloads;
  if (names.empty()) {
    for (const auto& w : zeus_workloads()) names.push_back(w.name);
  }
  std::vector<bso::TraceWorkload> workloads;
  std::vector<std::vector<int>> near;
  for (const auto& name : names) {
    try {
      workloads.push_back(load_zeus_workload(options.train_csv, options.power_csv, name));
    } catch (const Error& e) {
      // A paper workload this GPU's trace lacks (e.g. ImageNet's b0 = 256 on the P100) is listed
      // as skipped; one the user named is an error.
      if (!options.workloads.empty() || e.code() != ErrorCode::usage) throw;
      report.skipped.push_back(fmt::format("{}: {}", name, e.what()));
      continue;
    }
    const auto& w = workloads.back();
    report.gpu = w.gpu;
    BsoWorkloadSummary summary{w.name,
                               w.training_optimizer,
                               w.target_metric,
                               w.max_epochs,
                               w.default_batch_size,
                               w.batch_sizes.size(),
                               w.power.at(w.batch_sizes.front()).size(),
                               bso::trace_optimum(w, options.eta),
                               bso::default_cost(w, options.eta)};
    near.push_back(near_optimal_sizes(w, summary.optimum, options.eta));
    report.workloads.push_back(summary);
    for (const auto optimizer : options.optimizers) {
      report.rows.push_back({w.name, optimizer, std::vector<BsoSeedResult>(options.seeds.size())});
    }
  }

  // Every simulation is independent: a shared counter hands them to the worker threads.
  const std::size_t per_workload = options.optimizers.size() * options.seeds.size();
  const std::size_t total = workloads.size() * per_workload;
  std::atomic<std::size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  const auto worker = [&] {
    for (std::size_t i = next++; i < total; i = next++) {
      const std::size_t w = i / per_workload;
      const std::size_t o = (i % per_workload) / options.seeds.size();
      const std::size_t s = i % options.seeds.size();
      try {
        bso::SimOptions sim;
        sim.optimizer = options.optimizers[o];
        sim.seed = options.seeds[s];
        sim.recurrences = options.recurrences;
        sim.eta = options.eta;
        sim.beta = options.beta;
        report.rows[w * options.optimizers.size() + o].seeds[s] = reduce(bso::simulate(workloads[w], sim), sim.seed, near[w]);
      } catch (...) {
        const std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < std::max(1U, options.jobs); ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  return report;
}

std::string bso_bench_markdown(const BsoBenchReport& report) {
  const auto& o = report.options;
  std::string md = fmt::format(
      "# gpucap bso bench — {} power trace (simulated, trace-driven)\n\n"
      "η = {}, β = {}, seeds {}, {} recurrences. Every figure comes from Zeus's NSDI'23 traces replayed by "
      "gpucap's simulator (no GPU ran).\n\n",
      report.gpu, o.eta, o.beta ? fmt::format("{}", *o.beta) : "none", fmt::join(o.seeds, ", "), o.recurrences);
  md += "## Workloads and trace optimum (expected cost over the trace's runs)\n\n"
        "| workload | optimizer, target, max epochs | b0 | batch sizes × limits | default cost (b0 @ max PL) | "
        "optimum (bs, PL) | optimum cost | default / optimum |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& w : report.workloads) {
    md += fmt::format("| {} | {}, {}, {} | {} | {}×{} | {:.4g} | ({}, {:g} W) | {:.4g} | {:.1f}% |\n", w.workload,
                      w.training_optimizer, w.target_metric, w.max_epochs, w.default_batch_size, w.batch_sizes,
                      w.power_limits, w.default_cost, w.optimum.batch_size, w.optimum.power_limit_w, w.optimum.cost,
                      100.0 * w.default_cost / w.optimum.cost);
  }
  for (const auto& skipped : report.skipped) md += fmt::format("\nSkipped (not in this trace): {}\n", skipped);
  md += "\n## Regret and convergence per optimizer\n\n"
        "| workload | optimizer | regret over rec 1-50 in optimum costs: mean (per seed) | gpucap / zeus | "
        "rec. from which only the optimum bs is used (per seed) | same for any bs within 5% | "
        "mean cost rec 40-50, % of optimum: mean [min, max] | share of rec 40-50 on opt bs |\n"
        "|---|---|---|---|---|---|---|---|\n";
  for (const auto& row : report.rows) {
    const auto* zeus = report.find(row.workload, bso::OptimizerKind::zeus);
    const std::string ratio = row.optimizer == bso::OptimizerKind::gpucap && zeus != nullptr && zeus->mean_regret() > 0.0
                                  ? fmt::format("{:.2f}×", row.mean_regret() / zeus->mean_regret())
                                  : "";
    md += fmt::format("| {} | {} | {:.2f} ({}) | {} | {} | {} | {} | {:.2f} |\n", row.workload,
                      bso::optimizer_name(row.optimizer), row.mean_regret(), per_seed(row), ratio, settles(row, false),
                      settles(row, true), late_cost_text(row), late_share(row));
  }
  return md;
}

void write_bso_regret_svg(const BsoBenchReport& report, const std::string& svg) {
  const std::size_t panels = report.workloads.size();
  const std::size_t columns = panels > 1 ? 3 : 1;
  const std::size_t rows = (panels + columns - 1) / columns;
  std::string script = fmt::format(
      "set terminal svg size {},{} dynamic enhanced font 'sans,10'\nset output '{}'\n"
      "set multiplot layout {},{} title 'Cumulative regret (optimum costs), mean of seeds — {} trace, simulated' "
      "noenhanced\nset grid\nset key top left\nset xlabel 'recurrence'\n",
      380 * columns, 300 * rows, svg, rows, columns, report.gpu);
  constexpr const char* kColours[] = {"#d62728", "#1f77b4"};
  for (const auto& w : report.workloads) {
    script += fmt::format("set title '{}' noenhanced\nplot ", w.workload);
    std::vector<const BsoBenchRow*> lines;
    for (const auto& row : report.rows) {
      if (row.workload == w.workload) lines.push_back(&row);
    }
    for (std::size_t i = 0; i < lines.size(); ++i) {
      script += fmt::format("'-' with lines lw 2 lc rgb '{}' title '{}'{}", kColours[i % 2],
                            bso::optimizer_name(lines[i]->optimizer), i + 1 < lines.size() ? ", " : "\n");
    }
    for (const auto* row : lines) {
      const std::size_t n = row->seeds.front().cumulative_regret.size();
      for (std::size_t r = 0; r < n; ++r) {
        double sum = 0.0;
        for (const auto& s : row->seeds) sum += s.cumulative_regret[r];
        script += fmt::format("{} {:.4f}\n", r + 1, sum / static_cast<double>(row->seeds.size()));
      }
      script += "e\n";
    }
  }
  script += "unset multiplot\n";
  run_gnuplot(script, svg);
}

}  // namespace gpucap::bench
