// The twin's training step against Zeus's power traces: `gpucap fidelity --zeus-power-trace` and
// the zeus rows of the fidelity report.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "gpucap/calibrate/calibration.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/gnuplot.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::calibrate {

namespace {

// See ZeusTraceFidelity::time_floor.
void add_floor(ZeusTraceFidelity& f, const std::vector<bench::ZeusPowerRow>& rows) {
  std::map<std::tuple<std::string, std::string, std::string, int>, std::vector<const bench::ZeusPowerRow*>> groups;
  for (const auto& r : rows) {
    if (r.average_power_w < 0.8 * r.power_limit_w) groups[{r.dataset, r.network, r.optimizer, r.batch_size}].push_back(&r);
  }
  std::vector<double> time, power;
  for (const auto& [key, group] : groups) {
    if (group.size() < 3) continue;
    std::vector<double> t, p;
    for (const auto* r : group) {
      t.push_back(r->time_per_epoch_s);
      p.push_back(r->average_power_w);
    }
    const double mt = median(t), mp = median(p);
    for (const auto* r : group) {
      time.push_back(ape(r->time_per_epoch_s, mt));
      power.push_back(ape(r->average_power_w, mp));
    }
  }
  f.time_floor = error_stats(time);
  f.power_floor = error_stats(power);
}

std::string workload_of(const ZeusTracePoint& p) { return p.row.dataset + "/" + p.row.network; }

// Per workload: MAPE of time and power, and the mean signed time error at the smaller and the
// larger half of its batch sizes (where the twin is too fast or too slow).
struct WorkloadErrors {
  std::vector<double> time, power;
  std::map<int, std::vector<double>> signed_time_by_batch;
};

std::map<std::string, WorkloadErrors> errors_by_workload(const ZeusTraceFidelity& f) {
  std::map<std::string, WorkloadErrors> out;
  for (const auto& p : f.points) {
    auto& e = out[workload_of(p)];
    e.time.push_back(ape(p.twin.epoch_s, p.row.time_per_epoch_s));
    e.power.push_back(ape(p.twin.average_power_w, p.row.average_power_w));
    e.signed_time_by_batch[p.row.batch_size].push_back(p.twin.epoch_s / p.row.time_per_epoch_s - 1.0);
  }
  return out;
}

std::pair<double, double> small_and_large_batch_bias(const WorkloadErrors& e) {
  std::vector<double> small, large;
  const auto n = e.signed_time_by_batch.size();
  std::size_t i = 0;
  for (const auto& [batch, errors] : e.signed_time_by_batch) {
    auto& into = i++ < n / 2 ? small : large;
    into.insert(into.end(), errors.begin(), errors.end());
  }
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0.0;
    for (const double x : v) sum += x;
    return v.empty() ? 0.0 : 100.0 * sum / static_cast<double>(v.size());
  };
  return {mean(small), mean(large)};
}

std::string file_stem(const std::string& gpu, const std::string& workload) {
  auto name = fmt::format("zeus-{}-{}", gpu, workload);
  std::replace(name.begin(), name.end(), '/', '-');
  return name;
}

// How long an epoch took against the reference testbed's, measured and in the twin, per workload:
// at the smallest batch size both traces ran (host-bound), at the highest limit both ran it at.
std::vector<std::string> smallest_batch_ratios(const ZeusTraceFidelity& f, const ZeusTraceFidelity& reference) {
  std::vector<std::string> ratios;
  std::set<std::string> done;
  for (const auto& p : f.points) {
    const auto workload = workload_of(p);
    if (!done.insert(workload).second) continue;
    const ZeusTracePoint* mine = nullptr;
    const ZeusTracePoint* theirs = nullptr;
    for (const auto& q : f.points) {
      if (workload_of(q) != workload) continue;
      for (const auto& r : reference.points) {
        if (workload_of(r) != workload || r.row.batch_size != q.row.batch_size ||
            r.row.power_limit_w != q.row.power_limit_w || r.row.optimizer != q.row.optimizer) {
          continue;
        }
        const bool better = mine == nullptr || q.row.batch_size < mine->row.batch_size ||
                            (q.row.batch_size == mine->row.batch_size && q.row.power_limit_w > mine->row.power_limit_w);
        if (better) {
          mine = &q;
          theirs = &r;
        }
      }
    }
    if (mine == nullptr) continue;
    ratios.push_back(fmt::format("{} {:.2f}× (twin {:.2f}×) at batch {}", workload,
                                 mine->row.time_per_epoch_s / theirs->row.time_per_epoch_s,
                                 mine->twin.epoch_s / theirs->twin.epoch_s, mine->row.batch_size));
  }
  return ratios;
}

// What separates each trace from the reference testbed's (the first), from the data. A held-out
// trace: how much power the board drew at most against the twin's most, and its host-bound steps.
// A fitted one: its host-bound steps, which one host speed and one launch cost per testbed cannot
// all match when the workloads' ratios differ.
std::string zeus_misses(const std::vector<ZeusTraceFidelity>& traces) {
  if (traces.empty()) return {};
  const auto& reference = traces.front();
  std::string out;
  for (const auto& f : traces) {
    if (&f == &reference) continue;
    const auto ratios = join(smallest_batch_ratios(f, reference), "; ");
    if (!f.split.starts_with("held out")) {
      out += fmt::format(
          "\n**Where the twin misses on the {0} (fitted).** One host speed (`host.training_loop_scale`) and one "
          "launch cost (`host.layer_launch_s`) per testbed scale every workload's host-bound steps alike. An epoch "
          "at the smallest common batch size, against the {1}: {2}.\n",
          f.trace_gpu, reference.trace_gpu, ratios);
      continue;
    }
    double real_max_w = 0.0, twin_max_w = 0.0;
    for (const auto& p : f.points) {
      real_max_w = std::max(real_max_w, p.row.average_power_w);
      twin_max_w = std::max(twin_max_w, p.twin.average_power_w);
    }
    out += fmt::format(
        "\n**Where the twin misses on the {0} (held out).** Power: the {0} never averaged more than {1:.0f} W at any "
        "limit, the twin (nothing fitted to this trace) up to {2:.0f} W. Time: an epoch at the smallest common batch "
        "size (host-bound), against the {3}: {4}.\n",
        f.trace_gpu, real_max_w, twin_max_w, reference.trace_gpu, ratios);
  }
  return out;
}

}  // namespace

ZeusTraceFidelity compare_zeus_trace(const TwinParams& params, const sim::Catalog& catalog, const ZeusSetup& setup,
                                     const std::string& trace_csv, const std::optional<std::string>& gpu) {
  ZeusTraceFidelity out;
  const auto rows = bench::load_zeus_power_rows(trace_csv);
  out.trace_gpu = bench::zeus_trace_gpu(trace_csv);
  out.twin_gpu = zeus_twin_gpu(catalog, out.trace_gpu, rows, gpu).id;
  std::set<std::string> skipped;
  std::vector<double> time_errors, power_errors;
  for (const auto& row : rows) {
    const auto* mapping = find_mapping(setup, row);
    if (mapping == nullptr) {
      skipped.insert(row.dataset + "/" + row.network);
      ++out.skipped_rows;
      continue;
    }
    const auto twin = twin_training_point(params, out.twin_gpu, *mapping, row);
    time_errors.push_back(ape(twin.epoch_s, row.time_per_epoch_s));
    power_errors.push_back(ape(twin.average_power_w, row.average_power_w));
    out.real_excess_w = std::max(out.real_excess_w, row.average_power_w - row.power_limit_w);
    out.twin_excess_w = std::max(out.twin_excess_w, twin.average_power_w - row.power_limit_w);
    out.points.push_back({row, twin});
  }
  out.skipped_workloads.assign(skipped.begin(), skipped.end());
  if (out.points.empty()) {
    throw usage_error(fmt::format("{}: none of its workloads is one the twin runs (known: see data/calibration/zeus.json)",
                                  trace_csv));
  }
  out.time = error_stats(time_errors);
  out.power = error_stats(power_errors);
  add_floor(out, rows);
  return out;
}

std::string zeus_trace_text(const ZeusTraceFidelity& f) {
  std::string out = fmt::format("Zeus power trace of the {} against the SIMULATED {} (twin){}\n", f.trace_gpu, f.twin_gpu,
                                f.split.empty() ? "" : ", " + f.split);
  out += fmt::format("  {:<34} {:>7} {:>14} {:>15}\n", "workload", "configs", "time MAPE %", "power MAPE %");
  for (const auto& [name, e] : errors_by_workload(f)) {
    out += fmt::format("  {:<34} {:>7} {:>14.1f} {:>15.1f}\n", name, e.time.size(), error_stats(e.time).mape,
                       error_stats(e.power).mape);
  }
  if (f.time_floor.n > 0) {
    out += fmt::format("  the trace against itself ({} configurations the limit cannot matter to): time {:.1f}%, power {:.1f}%\n",
                       f.time_floor.n, f.time_floor.mape, f.power_floor.mape);
  }
  if (f.skipped_rows > 0) {
    out += fmt::format("  skipped {} rows of workloads the twin does not run: {}\n", f.skipped_rows,
                       join(f.skipped_workloads, ", "));
  }
  out += fmt::format("  average power above the limit, at most: measured {:.1f} W, twin {:.1f} W\n",
                     std::max(0.0, f.real_excess_w), std::max(0.0, f.twin_excess_w));
  out += fmt::format("zeus power-limit curves: time MAPE {:.1f}% power MAPE {:.1f}% ({} configs)\n", f.time.mape,
                     f.power.mape, f.points.size());
  return out;
}

std::string zeus_trace_csv(const ZeusTraceFidelity& f) {
  std::string out =
      "dataset,network,optimizer,batch_size,power_limit_w,time_per_epoch_s,twin_time_per_epoch_s,average_power_w,"
      "twin_average_power_w,twin_sm_clock_mhz\n";
  for (const auto& p : f.points) {
    out += fmt::format("{},{},{},{},{:g},{:g},{:.6g},{:g},{:.6g},{:g}\n", p.row.dataset, p.row.network, p.row.optimizer,
                       p.row.batch_size, p.row.power_limit_w, p.row.time_per_epoch_s, p.twin.epoch_s,
                       p.row.average_power_w, p.twin.average_power_w, p.twin.sm_clock_mhz);
  }
  return out;
}

std::string zeus_markdown(const std::vector<ZeusTraceFidelity>& traces) {
  if (traces.empty()) return {};
  std::string out =
      "\n## Training under power limits (Zeus's traces)\n\n"
      "Zeus's NSDI'23 traces (`../shared/data/zeus/nsdi23/summary_power_<gpu>.csv`) give the time per epoch and "
      "average power of six training workloads at every (batch size, power limit). The twin's training step "
      "(`sim/training_step.hpp`, docs/simulator.md) is fitted to the V100 and RTX 6000 traces; nothing is fitted to "
      "the P100's (held out). Its GPU keeps its datasheet figures and takes what the fitted testbeds say about "
      "what no trace of it fitted: the V100's fitted power model scaled by the P100's silicon (SMs × boost clock, "
      "memory bandwidth), and the geometric mean of the two testbeds' host speeds and compute efficiencies "
      "(docs/simulator.md). "
      "`gpucap fidelity --zeus-power-trace FILE` compares the twin of the current data files with any trace in "
      "that format.\n\n"
      "| trace | twin GPU | split | configs | time MAPE | power MAPE | trace vs itself: time / power | above the limit, at most: measured / twin |\n"
      "|---|---|---|---:|---:|---:|---:|---:|\n";
  for (const auto& f : traces) {
    out += fmt::format("| {} | {} | {} | {} | {:.1f} % | {:.1f} % | {:.1f} % / {:.1f} % | {:.1f} W / {:.1f} W |\n",
                       f.trace_gpu, f.twin_gpu, f.split, f.points.size(), f.time.mape, f.power.mape, f.time_floor.mape,
                       f.power_floor.mape, std::max(0.0, f.real_excess_w), std::max(0.0, f.twin_excess_w));
  }
  out += zeus_misses(traces);
  out += "\nPer workload (MAPE of time / power; the mean signed time error at the smaller and the larger half of "
         "its batch sizes, negative = the twin is too fast):\n\n| trace | workload | configs | time | power | "
         "time bias, small batches | large batches |\n|---|---|---:|---:|---:|---:|---:|\n";
  for (const auto& f : traces) {
    for (const auto& [name, e] : errors_by_workload(f)) {
      const auto [small, large] = small_and_large_batch_bias(e);
      out += fmt::format("| {} | {} | {} | {:.1f} % | {:.1f} % | {:+.1f} % | {:+.1f} % |\n", f.trace_gpu, name,
                         e.time.size(), error_stats(e.time).mape, error_stats(e.power).mape, small, large);
    }
  }
  return out;
}

void write_zeus_plots(const std::vector<ZeusTraceFidelity>& traces, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::io, fmt::format("{}: cannot create ({})", dir, ec.message()));
  for (const auto& f : traces) {
    std::map<std::string, std::map<int, std::vector<const ZeusTracePoint*>>> by_workload;
    for (const auto& p : f.points) by_workload[workload_of(p)][p.row.batch_size].push_back(&p);
    for (const auto& [workload, batches] : by_workload) {
      // Up to four batch sizes spread over the range: the smallest, the largest and two between.
      std::vector<int> sizes;
      for (const auto& [b, points] : batches) sizes.push_back(b);
      std::set<int> shown;
      for (const double q : {0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0}) {
        shown.insert(sizes[static_cast<std::size_t>(q * static_cast<double>(sizes.size() - 1) + 0.5)]);
      }
      const auto svg = (std::filesystem::path(dir) / (file_stem(f.trace_gpu, workload) + ".svg")).string();
      std::string script = fmt::format(
          "set terminal svg size 1100,420 dynamic enhanced font 'sans,11'\nset output '{}'\n"
          "set multiplot layout 1,2 title '{} on the {}: measured (points) vs the twin (lines, simulated)' noenhanced\n"
          "set xlabel 'power limit (W)'\nset key outside below\n",
          svg, workload, f.trace_gpu);
      const std::vector<std::string> colours = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"};
      for (const bool power : {false, true}) {
        script += fmt::format("set ylabel '{}'\nplot ", power ? "average power (W)" : "time per epoch (s)");
        std::string data;
        std::size_t c = 0;
        for (const int b : shown) {
          auto points = batches.at(b);
          std::sort(points.begin(), points.end(),
                    [](const auto* x, const auto* y) { return x->row.power_limit_w < y->row.power_limit_w; });
          script += fmt::format("{}'-' with points pt 7 lc rgb '{}' title 'bs {} measured', '-' with lines lw 1.5 lc rgb '{}' title 'bs {} twin'",
                                c == 0 ? "" : ", ", colours[c], b, colours[c], b);
          std::string measured, twin;
          for (const auto* p : points) {
            measured += fmt::format("{:g} {:g}\n", p->row.power_limit_w, power ? p->row.average_power_w : p->row.time_per_epoch_s);
            twin += fmt::format("{:g} {:g}\n", p->row.power_limit_w, power ? p->twin.average_power_w : p->twin.epoch_s);
          }
          data += measured + "e\n" + twin + "e\n";
          ++c;
        }
        script += "\n" + data;
      }
      script += "unset multiplot\n";
      run_gnuplot(script, svg);
    }
  }
}

std::vector<ZeusTraceFidelity> zeus_source_fidelity(const sim::Catalog& catalog, const SourcePaths& paths,
                                                    const TwinParams& current) {
  const auto problem = build_problem(Source::zeus, catalog, paths);
  const auto start = at_priors(current, catalog, problem.parameters);
  const auto fitted = fit_problem(problem, start).params;
  const auto setup = load_zeus_setup(paths.zeus_setup, catalog);
  std::vector<ZeusTraceFidelity> out;
  const auto add = [&](const std::string& gpu, const std::string& split) {
    const auto path = bench::zeus_power_trace_path(paths.zeus_traces, gpu);
    auto f = compare_zeus_trace(fitted, catalog, setup, path);
    f.split = split;
    const auto& derived = setup.derived_gpus;
    if (std::find(derived.begin(), derived.end(), f.twin_gpu) != derived.end()) {
      f.split += "; its power model, host and efficiency derived from the fitted testbeds'";
    }
    out.push_back(std::move(f));
  };
  for (const auto& gpu : setup.fit_gpus) add(gpu, "in-sample: fitted to this trace");
  for (const auto& gpu : setup.check_gpus) add(gpu, "held out: nothing fitted to this GPU's trace");
  return out;
}

}  // namespace gpucap::calibrate
