// The serve matrix's plots: goodput and p99 per GPU against the load, and the power of a run
// under its stepping cap (gnuplot, SVG).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "gpucap/bench/serve_bench.hpp"
#include "gpucap/core/gnuplot.hpp"
#include "gpucap/core/text.hpp"
#include "serve_output.hpp"

namespace gpucap::bench {

using namespace serve_output;

std::string serve_goodput_plot(const std::string& gpu) { return fmt::format("goodput-{}.svg", gpu); }
std::string serve_p99_plot(const std::string& gpu) { return fmt::format("p99-{}.svg", gpu); }
std::string serve_power_plot(const std::string& gpu, const std::string& model, double load) {
  return fmt::format("power-{}-{}-{}.svg", gpu, model, load_tag(load));
}

namespace {

// Per model of the GPU, one panel: a figure of every algorithm (and the oracle) against the load.
void write_load_plot(const ServeBenchReport& report, const std::string& gpu, const std::string& svg, const std::string& ylabel,
                     bool log_y, const std::function<double(const ServeFigures&)>& figure,
                     const std::function<double(const ServeModelResult&, const ServeCell&)>& reference,
                     const std::string& reference_title) {
  std::vector<const ServeModelResult*> results;
  for (const auto& r : report.results) {
    if (r.gpu == gpu) results.push_back(&r);
  }
  if (results.empty()) return;
  std::string script = fmt::format(
      "set terminal svg size {},420 dynamic enhanced font 'sans,11'\nset output '{}'\n"
      "set multiplot layout 1,{} title '{}: {} against the load (simulated)' noenhanced\n"
      "set grid\nset xlabel 'load (% of the capacity under the lowest cap)'\nset ylabel '{}'\nset key top left font ',9'\n{}",
      420 * results.size() + 120, svg, results.size(), gpu, ylabel, ylabel, log_y ? "set logscale y\n" : "unset logscale y\n");
  for (const auto* r : results) {
    script += fmt::format("set title '{}' noenhanced\nplot ", r->model);
    std::vector<std::string> names = report.algorithms;
    names.emplace_back(kOracle);
    for (std::size_t a = 0; a < names.size(); ++a) {
      const bool oracle = names[a] == kOracle;
      script += fmt::format("'-' with linespoints lw {} pt 7 ps 0.5 lc rgb '{}' {}title '{}', ", oracle ? 2.5 : 1.3,
                            oracle ? std::string("black") : colour(a), oracle ? "dt 2 " : "", names[a]);
    }
    script += fmt::format("'-' with lines lw 1 dt 3 lc rgb '#555555' title '{}'\n", reference_title);
    for (const auto& name : names) {
      for (const auto& cell : r->cells) {
        if (name == kOracle) {
          if (oracle_complete(cell)) script += fmt::format("{:g} {:g}\n", 100.0 * cell.load, figure(oracle_total(cell)));
        } else if (const auto* run = cell.run(name)) {
          // The whole run, but the worst segment's p99 (as the oracle's, which has no p99 over the run).
          auto f = run->total;
          for (const auto& s : run->segments) f.p99_s = std::max(f.p99_s, s.p99_s);
          script += fmt::format("{:g} {:g}\n", 100.0 * cell.load, figure(f));
        }
      }
      script += "e\n";
    }
    for (const auto& cell : r->cells) script += fmt::format("{:g} {:g}\n", 100.0 * cell.load, reference(*r, cell));
    script += "e\n";
  }
  script += "unset multiplot\n";
  run_gnuplot(script, svg);
}

// Window max power against the cap, and the sliding p99 against the SLO, over the run of one cell.
void write_power_plot(const ServeBenchReport& report, const ServeModelResult& r, const ServeCell& cell, const std::string& svg) {
  struct Series {
    std::string name;
    std::vector<ServeWindowPoint> windows;
    std::string colour;
  };
  std::vector<Series> series;
  for (std::size_t a = 0; a < report.algorithms.size(); ++a) {
    const auto& name = report.algorithms[a];
    if (name != "capserve" && name != "static") continue;
    if (const auto* run = cell.run(name)) series.push_back({name, run->windows, colour(a)});
  }
  Series oracle{kOracle, {}, "black"};
  for (const auto& o : cell.oracle) oracle.windows.insert(oracle.windows.end(), o.windows.begin(), o.windows.end());
  series.push_back(oracle);
  std::string script = fmt::format(
      "set terminal svg size 1000,640 dynamic enhanced font 'sans,11'\nset output '{}'\n"
      "set multiplot layout 2,1 title '{} {} at {} load ({:.0f} requests/s) — simulated' noenhanced\n"
      "set key outside right\nset grid\nset xlabel 'time (s)'\n",
      svg, r.gpu, r.model, load_text(cell.load), cell.rate_rps);
  script += "set ylabel 'window max power (W)'\nplot ";
  for (const auto& s : series) script += fmt::format("'-' with lines lw 1.2 lc rgb '{}' title '{}', ", s.colour, s.name);
  script += "'-' with steps lw 2 lc rgb '#d62728' title 'cap'\n";
  for (const auto& s : series) {
    for (const auto& w : s.windows) script += fmt::format("{:.3f} {:g}\n", w.end_s, w.max_power_w);
    script += "e\n";
  }
  for (const auto& step : r.schedule.steps()) script += fmt::format("{:g} {:g}\n", step.time_s, step.cap_w);
  script += fmt::format("{:g} {:g}\ne\n", report.matrix.segment_s * static_cast<double>(r.schedule.steps().size()),
                        r.schedule.steps().back().cap_w);
  script += "set ylabel 'p99 (ms, sliding)'\nset logscale y\nplot ";
  for (const auto& s : series) script += fmt::format("'-' with lines lw 1.2 lc rgb '{}' title '{}', ", s.colour, s.name);
  script += fmt::format("{:g} with lines lw 2 dt 2 lc rgb '#d62728' title 'SLO'\n", report.matrix.slo_s * 1e3);
  for (const auto& s : series) {
    for (const auto& w : s.windows) {
      if (w.p99_s > 0.0) script += fmt::format("{:.3f} {:g}\n", w.end_s, w.p99_s * 1e3);
    }
    script += "e\n";
  }
  script += "unset multiplot\n";
  run_gnuplot(script, svg);
}

}  // namespace

void write_serve_plots(const ServeBenchReport& report, const std::string& dir) {
  const auto path = [&dir](const std::string& file) { return (std::filesystem::path(dir) / file).string(); };
  for (const auto& g : report.matrix.gpus) {
    write_load_plot(
        report, g.gpu, path(serve_goodput_plot(g.gpu)), "goodput (requests/s)", false,
        [](const ServeFigures& f) { return f.goodput_rps; },
        [](const ServeModelResult&, const ServeCell& cell) { return cell.rate_rps; }, "offered");
    write_load_plot(
        report, g.gpu, path(serve_p99_plot(g.gpu)), "p99 (ms, worst segment)", true,
        [](const ServeFigures& f) { return std::max(f.p99_s * 1e3, 0.1); },
        [&report](const ServeModelResult&, const ServeCell&) { return report.matrix.slo_s * 1e3; }, "SLO");
  }
  const ServeTargets targets;
  for (const auto& r : report.results) {
    for (const auto& cell : r.cells) {
      if (std::abs(cell.load - targets.slo_load) < 1e-9 || std::abs(cell.load - targets.overload) < 1e-9) {
        write_power_plot(report, r, cell, path(serve_power_plot(r.gpu, r.model, cell.load)));
      }
    }
  }
}

}  // namespace gpucap::bench
