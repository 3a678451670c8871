// The serve matrix's output: summary.csv, summary.json and report.md (the plots: serve_plots.cpp).

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

namespace serve_output {

namespace {
constexpr const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
}  // namespace

std::string colour(std::size_t i) { return kColours[i % (sizeof(kColours) / sizeof(kColours[0]))]; }

std::string load_text(double load) { return fmt::format("{:g} %", 100.0 * load); }
std::string load_tag(double load) { return fmt::format("{:g}", 100.0 * load); }

// The oracle over the whole run: its segments' figures added up (p99: the worst segment's).
ServeFigures oracle_total(const ServeCell& cell) {
  ServeFigures t;
  t.cap_w = std::numeric_limits<double>::quiet_NaN();
  if (cell.oracle.empty()) return t;
  t.start_s = cell.oracle.front().figures.start_s;
  t.end_s = cell.oracle.back().figures.end_s;
  double power_time = 0.0;
  for (const auto& o : cell.oracle) {
    const auto& f = o.figures;
    t.arrivals += f.arrivals;
    t.answered += f.answered;
    t.good += f.good;
    t.shed += f.shed;
    t.refused += f.refused;
    t.failed += f.failed;
    t.energy_j += f.energy_j;
    t.max_power_w = std::max(t.max_power_w, f.max_power_w);
    t.p99_s = std::max(t.p99_s, f.p99_s);
    t.windows += f.windows;
    t.windows_over_cap += f.windows_over_cap;
    t.windows_over_cap_outside_transitions += f.windows_over_cap_outside_transitions;
    t.max_queued_requests = std::max(t.max_queued_requests, f.max_queued_requests);
    power_time += f.end_s - f.start_s;
  }
  const double length = std::max(t.end_s - t.start_s, 1e-9);
  t.goodput_rps = static_cast<double>(t.good) / length;
  const auto judged = t.answered + t.failed;
  t.slo_attainment = judged > 0 ? static_cast<double>(t.good) / static_cast<double>(judged) : 1.0;
  t.mean_power_w = power_time > 0.0 ? t.energy_j / power_time : 0.0;
  return t;
}

bool oracle_complete(const ServeCell& cell) {
  return std::all_of(cell.oracle.begin(), cell.oracle.end(), [](const ServeOracleSegment& o) { return o.setting.has_value(); });
}

}  // namespace serve_output

using namespace serve_output;

namespace {

std::optional<double> pct_of(double value, double reference) {
  if (!(reference > 0.0)) return std::nullopt;
  return 100.0 * value / reference;
}

// A CSV field: quoted when it holds a comma or a quote (the settings' descriptions never do today).
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string opt_text(std::optional<double> value, const char* format = "{:.1f}") {
  return value ? fmt::format(fmt::runtime(format), *value) : std::string("–");
}

nlohmann::json figures_json(const ServeFigures& f) {
  return {{"start_s", f.start_s},
          {"end_s", f.end_s},
          {"cap_w", std::isnan(f.cap_w) ? nlohmann::json() : nlohmann::json(f.cap_w)},
          {"arrivals", f.arrivals},
          {"answered", f.answered},
          {"good", f.good},
          {"shed", f.shed},
          {"refused", f.refused},
          {"failed", f.failed},
          {"goodput_rps", f.goodput_rps},
          {"slo_attainment", f.slo_attainment},
          {"p99_s", f.p99_s},
          {"mean_power_w", f.mean_power_w},
          {"max_power_w", f.max_power_w},
          {"energy_j", f.energy_j},
          {"windows", f.windows},
          {"windows_over_cap", f.windows_over_cap},
          {"windows_over_cap_outside_transitions", f.windows_over_cap_outside_transitions},
          {"max_queued_requests", f.max_queued_requests}};
}

nlohmann::json capacity_json(const ServeCapacity& c) {
  return {{"cap_w", c.cap_w},
          {"capacity_rps", c.capacity_rps},
          {"setting", c.setting.describe()},
          {"settings", c.settings},
          {"simulations", c.simulations}};
}

// One CSV row of figures.
std::vector<std::string> csv_row(const ServeModelResult& r, const ServeCell& cell, const std::string& algorithm,
                                 const std::string& segment, const ServeFigures& f, std::optional<double> oracle_goodput,
                                 const std::string& setting) {
  const auto capacity = std::isnan(f.cap_w) ? nullptr : r.capacity_at(f.cap_w);
  return {r.gpu,
          r.model,
          sim::to_string(r.precision),
          fmt::format("{:g}", cell.load),
          fmt::format("{:.3f}", cell.rate_rps),
          algorithm,
          segment,
          std::isnan(f.cap_w) ? std::string() : fmt::format("{:g}", f.cap_w),
          capacity != nullptr ? fmt::format("{:.3f}", capacity->capacity_rps) : std::string(),
          std::to_string(f.arrivals),
          std::to_string(f.answered),
          std::to_string(f.good),
          std::to_string(f.shed),
          std::to_string(f.refused),
          std::to_string(f.failed),
          fmt::format("{:.3f}", f.goodput_rps),
          oracle_goodput ? opt_text(pct_of(f.goodput_rps, *oracle_goodput), "{:.2f}") : std::string(),
          fmt::format("{:.5f}", f.slo_attainment),
          fmt::format("{:.2f}", f.p99_s * 1e3),
          fmt::format("{:.2f}", f.mean_power_w),
          fmt::format("{:.2f}", f.max_power_w),
          fmt::format("{:.1f}", f.energy_j),
          std::to_string(f.windows),
          std::to_string(f.windows_over_cap),
          std::to_string(f.windows_over_cap_outside_transitions),
          std::to_string(f.max_queued_requests),
          setting};
}

}  // namespace

std::string serve_summary_csv(const ServeBenchReport& report) {
  std::string out =
      "gpu,model,precision,load,rate_rps,algorithm,segment,cap_w,capacity_rps,arrivals,answered,good,shed,refused,failed,"
      "goodput_rps,pct_of_oracle,slo_attainment,p99_ms,mean_power_w,max_power_w,energy_j,windows,windows_over_cap,"
      "windows_over_cap_outside_transitions,max_queued_requests,setting\n";
  const auto line = [&out](const std::vector<std::string>& fields) {
    std::vector<std::string> quoted;
    for (const auto& f : fields) quoted.push_back(csv_field(f));
    out += join(quoted, ",") + "\n";
  };
  for (const auto& r : report.results) {
    for (const auto& cell : r.cells) {
      const auto oracle_all = oracle_total(cell);
      const bool complete = oracle_complete(cell);
      for (const auto& run : cell.runs) {
        for (std::size_t k = 0; k < run.segments.size(); ++k) {
          const auto& o = cell.oracle[k];
          line(csv_row(r, cell, run.algorithm, std::to_string(k + 1), run.segments[k],
                       o.setting ? std::optional<double>(o.figures.goodput_rps) : std::nullopt, ""));
        }
        line(csv_row(r, cell, run.algorithm, "all", run.total,
                     complete ? std::optional<double>(oracle_all.goodput_rps) : std::nullopt, ""));
      }
      for (std::size_t k = 0; k < cell.oracle.size(); ++k) {
        const auto& o = cell.oracle[k];
        line(csv_row(r, cell, kOracle, std::to_string(k + 1), o.figures,
                     o.setting ? std::optional<double>(o.figures.goodput_rps) : std::nullopt,
                     o.setting ? o.setting->describe() : "none"));
      }
      line(csv_row(r, cell, kOracle, "all", oracle_all, complete ? std::optional<double>(oracle_all.goodput_rps) : std::nullopt,
                   ""));
    }
  }
  return out;
}

nlohmann::json serve_summary_json(const ServeBenchReport& report) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : report.results) {
    nlohmann::json caps = nlohmann::json::array();
    for (const auto& c : r.capacities) caps.push_back(capacity_json(c));
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& cell : r.cells) {
      nlohmann::json runs = nlohmann::json::array();
      for (const auto& run : cell.runs) {
        nlohmann::json segments = nlohmann::json::array();
        for (const auto& s : run.segments) segments.push_back(figures_json(s));
        runs.push_back({{"algorithm", run.algorithm}, {"segments", segments}, {"total", figures_json(run.total)}});
      }
      nlohmann::json oracle = nlohmann::json::array();
      for (const auto& o : cell.oracle) {
        oracle.push_back({{"setting", o.setting ? nlohmann::json(o.setting->describe()) : nlohmann::json()},
                          {"sheds", o.sheds},
                          {"settings", o.settings},
                          {"stopped_early", o.stopped_early},
                          {"figures", figures_json(o.figures)}});
      }
      cells.push_back({{"load", cell.load}, {"rate_rps", cell.rate_rps}, {"runs", runs}, {"oracle", oracle},
                       {"oracle_total", figures_json(oracle_total(cell))}});
    }
    results.push_back({{"gpu", r.gpu},
                       {"model", r.model},
                       {"precision", sim::to_string(r.precision)},
                       {"cap_schedule", r.schedule.to_string()},
                       {"capacities", caps},
                       {"uncapped", r.uncapped ? capacity_json(*r.uncapped) : nlohmann::json()},
                       {"cells", cells}});
  }
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : serve_checks(report)) {
    checks.push_back({{"gpu", c.gpu},
                      {"model", c.model},
                      {"check", c.check},
                      {"target", c.target},
                      {"measured", c.measured},
                      {"result", !c.run ? "not judged" : (c.pass ? "PASS" : "MISS")}});
  }
  return {{"matrix", report.matrix.id},
          {"seed", report.seed},
          {"sample_hz", report.sample_hz},
          {"simulated", true},
          {"slo_s", report.matrix.slo_s},
          {"segment_s", report.matrix.segment_s},
          {"algorithms", report.algorithms},
          {"oracle_settings", report.oracle_settings},
          {"results", results},
          {"checks", checks}};
}

namespace {

std::string checks_section(const ServeBenchReport& report) {
  const auto checks = serve_checks(report);
  int pass = 0;
  int miss = 0;
  for (const auto& c : checks) {
    if (!c.run) continue;
    (c.pass ? pass : miss) += 1;
  }
  std::string md = fmt::format(
      "## The issue's checks (capserve)\n\n{} PASS, {} MISS{}. Each line is judged from the figures below; a MISS "
      "says by how much.\n\n| GPU | model | check | target | measured | result |\n|---|---|---|---|---|---|\n",
      pass, miss, pass + miss < static_cast<int>(checks.size()) ? ", the rest not judged (the matrix has no such cell)" : "");
  for (const auto& c : checks) {
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", c.gpu, c.model, c.check, c.target, c.measured,
                      !c.run ? "not judged" : (c.pass ? "PASS" : "**MISS**"));
  }
  return md;
}

std::string setup_section(const ServeBenchReport& report) {
  const auto& m = report.matrix;
  std::string md = "## Setup\n\n";
  md += fmt::format(
      "- SLO: p99 latency {:g} ms. Each cap holds {:g} s (a segment); arrivals stop after the last segment and the "
      "queue then drains for at most {:g} s (a request still queued after that failed).\n"
      "- Loads: {} of the capacity under the lowest cap of the GPU's schedule (Poisson arrivals, one request = one "
      "item).\n"
      "- The model's batch bound (Triton's `max_batch_size`): {}.\n"
      "- **static** (Triton-style): batch cap {}, queue delay {:g} ms, the GPU's own clocks, power limit set to the cap "
      "in force (as `nvidia-smi -pl` would). {}\n"
      "- **Seeds** under serve (`control::SeedServing`): their batch size becomes the batch cap, their clock and power "
      "limit go to the GPU, the delay is static's, nothing is shed. capfit and capserve use the model's profile "
      "measured on the twin before the runs (`measure_default_profile`).\n"
      "- Power sampled at {:g} Hz; windows of 1 s (capserve, static, the oracle) or the seed's own period.\n\n",
      m.slo_s * 1e3, m.segment_s, m.drain_s,
      join([&] {
        std::vector<std::string> v;
        for (const double l : m.loads) v.push_back(load_text(l));
        return v;
      }(), ", "),
      m.model_max_batch_size, m.static_max_batch_size, m.static_max_queue_delay_s * 1e3, m.static_note, report.sample_hz);
  md += "| GPU | cap schedule (W) | why these caps |\n|---|---|---|\n";
  for (const auto& g : m.gpus) {
    std::vector<std::string> caps;
    for (const double c : g.caps_w) caps.push_back(fmt::format("{:g}", c));
    md += fmt::format("| {} | {} | {} |\n", g.gpu, join(caps, " → "), g.note);
  }
  md += "\nCapacity (requests/s meeting the SLO and the cap; definitions below). The caps bind where the capacity under "
        "them is below the capacity at the board's highest power limit:\n\n"
        "| GPU | model | precision | at the board's limit | under each cap of the schedule (% of that) | capacity setting under the lowest cap | why this model |\n"
        "|---|---|---|---:|---|---|---|\n";
  for (const auto& r : report.results) {
    std::vector<std::string> parts;
    for (const auto& c : r.capacities) {
      const double uncapped = r.uncapped ? r.uncapped->capacity_rps : 0.0;
      parts.push_back(fmt::format("{:g} W: {:.1f}{}", c.cap_w, c.capacity_rps,
                                  uncapped > 0.0 ? fmt::format(" ({:.1f} %)", 100.0 * c.capacity_rps / uncapped) : ""));
    }
    const auto* lowest = r.capacity_at(r.schedule.min_cap_w());
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", r.gpu, r.model, sim::to_string(r.precision),
                      r.uncapped ? fmt::format("{:.1f} ({:g} W)", r.uncapped->capacity_rps, r.uncapped->cap_w) : "–",
                      join(parts, ", "), lowest != nullptr ? lowest->setting.describe() : "–", r.note);
  }
  return md;
}

std::string definitions_section(const ServeBenchReport& report) {
  int capacity_sims = 0;
  int oracle_searches = 0;
  int stopped = 0;
  int searched = 0;
  int shedding = 0;
  std::vector<std::string> per_gpu;
  for (const auto& r : report.results) {
    if (r.cells.empty() || r.cells.front().oracle.empty()) continue;
    const auto text = fmt::format("{} on the {}", r.cells.front().oracle.front().settings, r.gpu);
    if (std::find(per_gpu.begin(), per_gpu.end(), text) == per_gpu.end()) per_gpu.push_back(text);
  }
  const auto settings_per_gpu = join(per_gpu, ", ");
  for (const auto& r : report.results) {
    for (const auto& c : r.capacities) capacity_sims += c.simulations;
    if (r.uncapped) capacity_sims += r.uncapped->simulations;
    for (const auto& cell : r.cells) {
      for (const auto& o : cell.oracle) {
        ++oracle_searches;
        searched += o.settings;
        stopped += o.stopped_early;
        if (o.sheds) ++shedding;
      }
    }
  }
  return fmt::format(
      "## Definitions\n\n"
      "- **Static setting**: a batch cap B, a queue delay D, an SM clock f (a level of the GPU's DVFS ladder, or the "
      "GPU's own clock) and a memory clock m (where the GPU has several: capserve sets it too), held for the whole "
      "segment, with the power limit set to the cap. The oracle's space: B in {{{}}}, D in {{{}}} ms, f in the "
      "ladder{}, m in {} — settings per search: {}.\n"
      "- **Capacity under a cap**: the highest Poisson arrival rate some static setting serves for one segment ({:g} s) "
      "under that cap with an SLO attainment ≥ 99 % and no window over the cap. Every setting is tried: at 0.5 % above "
      "the best rate so far, and where it holds there its own highest rate is found by growing and bisecting the rate "
      "(to 0.5 %); it assumes that a setting that fails at a rate fails at every higher one. {} simulations for all "
      "the capacities of this report.\n"
      "- **Load X %**: Poisson arrivals at X % of the capacity under the *lowest* cap of the GPU's schedule, for the "
      "whole run (the issue's definition); under the higher caps the same rate is a smaller share of their capacity.\n"
      "- **Oracle** of a cap segment: every static setting simulated over that segment's arrivals (the very requests "
      "the algorithms get in it) under its cap alone, on a fresh twin; among those with an SLO attainment ≥ 99 % and no "
      "window over the cap, the most requests within the SLO, ties to the least energy. A setting stops early once it "
      "has failed or can no longer win (fewer requests within the SLO still possible than the best has, or as many "
      "and more energy already): the result is what running each to its end would give. When no setting carries the "
      "whole load, the oracle sheds: the capacity's setting admitting the capacity's rate (a token bucket as "
      "capserve's, lowered by 1 % steps until it meets the SLO). {} searches, {} settings simulated, {} of them "
      "stopped early; {} searches shed. The oracle starts each segment afresh (empty queue, settled GPU), so it sees no "
      "cap transition.\n"
      "- **Goodput**: requests answered within the SLO per second of the segment; a request belongs to the segment it "
      "arrived in. **SLO attainment**: requests within the SLO / requests answered or failed (shed requests are not "
      "judged). **p99**: of the answered requests, exact.\n"
      "- **Windows over the cap**: windows (closed by the controller, 1 s or its own period) in which some power "
      "sample was above the cap in force when it was taken; *outside transitions* leaves out the windows that hold a "
      "sample between a cap change and the reading of the controller's answer to it. A window belongs to the segment "
      "its middle falls in.\n"
      "- **Shed**: refused at admission with 429 (capserve's admit rate or queue bound; the oracle's admit rate where it "
      "sheds); **refused**: refused by the queue; "
      "**failed**: timed out, an engine error, or still queued at the end. **Max queue**: requests queued at the end "
      "of a window, the largest. **Energy**: Σ window mean power × window length.\n",
      join([&] {
        std::vector<std::string> v;
        for (const int b : report.matrix.oracle.batch_sizes) v.push_back(std::to_string(b));
        return v;
      }(), ", "),
      join([&] {
        std::vector<std::string> v;
        for (const double d : report.matrix.oracle.delays_s) v.push_back(fmt::format("{:g}", d * 1e3));
        return v;
      }(), ", "),
      report.matrix.oracle.gpu_clock ? " and the GPU's own clock" : "",
      report.matrix.oracle.memory_clocks ? "every memory clock of the GPU (the driver's default where it has one)"
                                         : "the driver's default",
      settings_per_gpu, report.matrix.segment_s,
      capacity_sims, oracle_searches, searched, stopped, shedding);
}

std::string cell_table(const ServeModelResult& r, const ServeCell& cell, const std::vector<std::string>& algorithms) {
  const auto segments = r.schedule.steps().size();
  std::string md = fmt::format("#### {} load: {:.1f} requests/s\n\n| algorithm |", load_text(cell.load), cell.rate_rps);
  std::string rule = "|---|";
  for (const auto& step : r.schedule.steps()) {
    md += fmt::format(" {:g} W: goodput (% oracle) |", step.cap_w);
    rule += "---:|";
  }
  md += " SLO attainment (worst segment) | p99 ms (worst) | windows over cap % (outside transitions) | mean / max W | "
        "energy kJ | shed | failed | max queue |\n";
  rule += "---:|---:|---:|---:|---:|---:|---:|---:|\n";
  md += rule;
  const auto row = [&](const std::string& name, const std::vector<ServeFigures>& segs, const ServeFigures& total) {
    md += fmt::format("| {} |", name);
    double worst_att = 1.0;
    double worst_p99 = 0.0;
    for (std::size_t k = 0; k < segments; ++k) {
      if (k >= segs.size()) {
        md += " – |";
        continue;
      }
      const auto& o = cell.oracle[k];
      const auto pct = o.setting ? pct_of(segs[k].goodput_rps, o.figures.goodput_rps) : std::nullopt;
      md += fmt::format(" {:.1f} ({}) |", segs[k].goodput_rps, opt_text(pct));
      worst_att = std::min(worst_att, segs[k].slo_attainment);
      worst_p99 = std::max(worst_p99, segs[k].p99_s);
    }
    md += fmt::format(" {:.2f} % | {:.1f} | {:.2f} ({:.2f}) | {:.0f} / {:.0f} | {:.1f} | {} | {} | {} |\n", 100.0 * worst_att,
                      worst_p99 * 1e3, total.over_cap_pct(), total.over_cap_outside_pct(), total.mean_power_w,
                      total.max_power_w, total.energy_j / 1e3, total.shed, total.failed, total.max_queued_requests);
  };
  for (const auto& name : algorithms) {
    if (const auto* run = cell.run(name)) row(name, run->segments, run->total);
  }
  std::vector<ServeFigures> oracle_segments;
  for (const auto& o : cell.oracle) oracle_segments.push_back(o.figures);
  row("oracle", oracle_segments, oracle_total(cell));
  // Per segment in full, folded.
  md += "\n<details><summary>Per segment</summary>\n\n"
        "| algorithm | cap W | goodput req/s | % oracle | SLO attainment | p99 ms | windows over cap (outside transitions) | "
        "mean / max W | energy kJ | arrivals | shed | refused | failed | max queue |\n"
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
  const auto detail = [&](const std::string& name, std::size_t k, const ServeFigures& f) {
    const auto& o = cell.oracle[k];
    const auto pct = o.setting ? pct_of(f.goodput_rps, o.figures.goodput_rps) : std::nullopt;
    md += fmt::format("| {} | {:g} | {:.1f} | {} | {:.2f} % | {:.1f} | {} of {} ({}) | {:.0f} / {:.0f} | {:.2f} | {} | {} | {} | {} | {} |\n",
                      name, f.cap_w, f.goodput_rps, opt_text(pct), 100.0 * f.slo_attainment, f.p99_s * 1e3,
                      f.windows_over_cap, f.windows, f.windows_over_cap_outside_transitions, f.mean_power_w, f.max_power_w,
                      f.energy_j / 1e3, f.arrivals, f.shed, f.refused, f.failed, f.max_queued_requests);
  };
  for (const auto& name : algorithms) {
    if (const auto* run = cell.run(name)) {
      for (std::size_t k = 0; k < run->segments.size(); ++k) detail(name, k, run->segments[k]);
    }
  }
  for (std::size_t k = 0; k < cell.oracle.size(); ++k) {
    const auto& o = cell.oracle[k];
    detail(o.setting ? fmt::format("oracle: {}{}", o.setting->describe(), o.sheds ? " (sheds)" : "") : "oracle: none",
           k, o.figures);
  }
  md += "\n</details>\n\n";
  return md;
}

// One line per cell: capserve and static against the oracle, segment by segment.
std::string overview_section(const ServeBenchReport& report) {
  std::string md =
      "## Overview: capserve and static against the oracle\n\n"
      "Per cell, the worst segment's goodput as % of that segment's oracle, the worst segment's SLO attainment, "
      "the run's windows over the cap (% of its windows) and the share of requests shed.\n\n"
      "| GPU | model | load | req/s | capserve % oracle | capserve attainment | capserve over cap % | capserve shed % | "
      "static % oracle | static attainment | static over cap % |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : report.results) {
    for (const auto& cell : r.cells) {
      const auto worst = [&cell](const ServeRun* run) -> std::pair<std::string, std::string> {
        if (run == nullptr) return {"–", "–"};
        std::optional<double> pct;
        double attainment = 1.0;
        for (std::size_t k = 0; k < run->segments.size() && k < cell.oracle.size(); ++k) {
          attainment = std::min(attainment, run->segments[k].slo_attainment);
          if (!cell.oracle[k].setting) continue;
          const auto p = pct_of(run->segments[k].goodput_rps, cell.oracle[k].figures.goodput_rps);
          if (p && (!pct || *p < *pct)) pct = p;
        }
        return {opt_text(pct), fmt::format("{:.2f} %", 100.0 * attainment)};
      };
      const auto* capserve = cell.run("capserve");
      const auto* fixed = cell.run("static");
      const auto [c_pct, c_att] = worst(capserve);
      const auto [s_pct, s_att] = worst(fixed);
      const auto shed = capserve != nullptr && capserve->total.arrivals > 0
                            ? fmt::format("{:.1f}", 100.0 * static_cast<double>(capserve->total.shed) /
                                                        static_cast<double>(capserve->total.arrivals))
                            : std::string("–");
      md += fmt::format("| {} | {} | {} | {:.1f} | {} | {} | {} | {} | {} | {} | {} |\n", r.gpu, r.model, load_text(cell.load),
                        cell.rate_rps, c_pct, c_att,
                        capserve != nullptr ? fmt::format("{:.2f}", capserve->total.over_cap_pct()) : "–", shed, s_pct,
                        s_att, fixed != nullptr ? fmt::format("{:.2f}", fixed->total.over_cap_pct()) : "–");
    }
  }
  return md;
}

}  // namespace

std::string serve_report_markdown(const ServeBenchReport& report, const std::string& command, bool with_plots) {
  const auto& m = report.matrix;
  std::string md = fmt::format("# Serving under a stepping power cap: matrix `{}` (simulated)\n\n", m.id);
  md += "**Every figure on this page is simulated** — gpucap's GPU twin in virtual time, not a real GPU.\n";
  if (!m.description.empty()) md += m.description + "\n";
  md += fmt::format("\nGenerated by `{}` (seed {}, power sampled at {:g} Hz). Re-running the command reproduces it exactly.\n\n",
                    command, report.seed, report.sample_hz);
  md += checks_section(report) + "\n";
  md += overview_section(report) + "\n";
  md += setup_section(report) + "\n";
  md += definitions_section(report) + "\n";
  if (with_plots) {
    md += "## Plots\n\n";
    for (const auto& g : m.gpus) {
      md += fmt::format("![goodput per load, {}](plots/{})\n\n![p99 per load, {}](plots/{})\n\n", g.gpu,
                        serve_goodput_plot(g.gpu), g.gpu, serve_p99_plot(g.gpu));
    }
    for (const auto& r : report.results) {
      for (const auto& cell : r.cells) {
        if (std::abs(cell.load - ServeTargets{}.slo_load) < 1e-9 || std::abs(cell.load - ServeTargets{}.overload) < 1e-9) {
          md += fmt::format("![power and p99 over time, {} {} at {} load](plots/{})\n\n", r.gpu, r.model,
                            load_text(cell.load), serve_power_plot(r.gpu, r.model, cell.load));
        }
      }
    }
  }
  md += "## Results per GPU, model and load\n\n"
        "Goodput per segment in requests/s, with its share of the oracle's in that segment; the other columns over the "
        "whole run. *Per segment* unfolds every figure of every segment.\n\n";
  for (const auto& r : report.results) {
    md += fmt::format("### {} — {} ({}), caps {}\n\n", r.gpu, r.model, sim::to_string(r.precision), r.schedule.to_string());
    for (const auto& cell : r.cells) md += cell_table(r, cell, report.algorithms);
  }
  return md;
}

}  // namespace gpucap::bench
