#include "gpucap/bench/plots.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "gpucap/core/gnuplot.hpp"

namespace gpucap::bench {

namespace {

// Enough distinct colours for every algorithm gpucap has.
constexpr const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string colour(std::size_t i) { return kColours[i % (sizeof(kColours) / sizeof(kColours[0]))]; }

const BenchRun* find(const std::vector<BenchRun>& runs, const std::string& job, const std::string& algorithm) {
  for (const auto& run : runs) {
    if (run.job == job && run.algorithm == algorithm) return &run;
  }
  return nullptr;
}

// Gnuplot inline data: one "x y" line per window, "e" at the end.
template <typename Value>
std::string series(const BenchRun& run, Value value) {
  std::string out;
  for (const auto& row : run.trace) out += fmt::format("{:.3f} {:g}\n", row.time_s, value(row));
  return out + "e\n";
}

void write_timeline(const MatrixJob& job, const std::vector<BenchRun>& runs, const std::vector<std::string>& algorithms,
                    const std::string& svg) {
  std::vector<const BenchRun*> present;
  std::vector<std::size_t> index;
  for (std::size_t a = 0; a < algorithms.size(); ++a) {
    if (const auto* run = find(runs, job.id, algorithms[a])) {
      present.push_back(run);
      index.push_back(a);
    }
  }
  if (present.empty()) return;
  std::string script = fmt::format(
      "set terminal svg size 1000,640 dynamic enhanced font 'sans,11'\nset output '{}'\n"
      "set multiplot layout 2,1 title 'Job {} ({}, cap {} W) — simulated' noenhanced\n"
      "set key outside right\nset grid\nset xlabel 'time (s)'\n",
      svg, job.id, job.model, job.schedule.to_string());
  // Power: every algorithm's window maximum, and the cap.
  script += "set ylabel 'window max power (W)'\nplot ";
  for (std::size_t i = 0; i < present.size(); ++i) {
    script += fmt::format("'-' with lines lw 1.2 lc rgb '{}' title '{}', ", colour(index[i]), present[i]->algorithm);
  }
  script += "'-' with steps lw 2 lc rgb 'black' title 'cap'\n";
  for (const auto* run : present) script += series(*run, [](const runtime::TraceRow& r) { return r.window_max_w; });
  script += series(*present.front(), [](const runtime::TraceRow& r) { return r.cap_w; });
  // Batch size.
  script += "set ylabel 'batch size'\nset logscale y 2\nplot ";
  for (std::size_t i = 0; i < present.size(); ++i) {
    script += fmt::format("'-' with steps lw 1.2 lc rgb '{}' title '{}'{}", colour(index[i]), present[i]->algorithm,
                          i + 1 < present.size() ? ", " : "\n");
  }
  for (const auto* run : present) {
    script += series(*run, [](const runtime::TraceRow& r) { return static_cast<double>(r.batch_size); });
  }
  script += "unset multiplot\n";
  run_gnuplot(script, svg);
}

void write_oracle_chart(const Matrix& matrix, const std::vector<BenchRun>& runs,
                        const std::vector<std::string>& algorithms, const std::string& svg) {
  std::string data;
  for (std::size_t a = 0; a < algorithms.size(); ++a) {
    double sum = 0.0;
    int count = 0;
    for (const auto& job : matrix.jobs) {
      const auto* run = find(runs, job.id, algorithms[a]);
      if (run == nullptr) continue;
      if (const auto pct = run->pct_of_oracle()) {
        sum += *pct;
        ++count;
      }
    }
    if (count > 0) data += fmt::format("{} \"{}\" {:.2f}\n", a, algorithms[a], sum / count);
  }
  if (data.empty()) return;
  const auto script = fmt::format(
      "set terminal svg size 800,400 dynamic enhanced font 'sans,11'\nset output '{}'\n"
      "set title 'Matrix {}: mean throughput as % of the oracle (simulated)' noenhanced\n"
      "set style fill solid 0.8\nset boxwidth 0.6\nset yrange [0:*]\nset grid ytics\nset ylabel '% of oracle'\n"
      "unset key\nplot '-' using 1:3:xtic(2) with boxes lc rgb '#1f77b4', '' using 1:3:(sprintf(\"%.1f\", $3)) "
      "with labels offset 0,1\n{}e\n{}e\n",
      svg, matrix.id, data, data);
  run_gnuplot(script, svg);
}

// Mean and worst best-so-far % of the oracle over every search, against evaluations.
void write_search_chart(const Matrix& matrix, const std::vector<BenchRun>& runs, const std::string& svg) {
  std::size_t longest = 0;
  for (const auto& run : runs) {
    for (const auto& search : run.searches) longest = std::max(longest, search.best_img_s.size());
  }
  std::string mean_data, worst_data;
  for (std::size_t n = 1; n <= longest; ++n) {
    double sum = 0.0, worst = 1e300;
    int count = 0;
    for (const auto& run : runs) {
      for (const auto& search : run.searches) {
        if (const auto pct = search.pct_of_oracle_after(n)) {
          sum += *pct;
          worst = std::min(worst, *pct);
          ++count;
        }
      }
    }
    if (count == 0) continue;
    mean_data += fmt::format("{} {:.3f}\n", n, sum / count);
    worst_data += fmt::format("{} {:.3f}\n", n, worst);
  }
  if (mean_data.empty()) return;
  const auto script = fmt::format(
      "set terminal svg size 800,420 dynamic enhanced font 'sans,11'\nset output '{}'\n"
      "set title 'Matrix {}: BOBD best so far as % of the oracle (simulated)' noenhanced\n"
      "set grid\nset xlabel 'evaluations'\nset ylabel '% of oracle'\nset yrange [0:105]\nset key bottom right\n"
      "plot '-' with lines lw 2 lc rgb '#1f77b4' title 'mean over searches', "
      "'-' with lines lw 1.5 lc rgb '#d62728' title 'worst search', 98 with lines dt 2 lc rgb 'black' title '98 %'\n"
      "{}e\n{}e\n",
      svg, matrix.id, mean_data, worst_data);
  run_gnuplot(script, svg);
}

}  // namespace

bool has_searches(const std::vector<BenchRun>& runs) {
  return std::any_of(runs.begin(), runs.end(), [](const BenchRun& r) { return !r.searches.empty(); });
}

std::string timeline_file(const std::string& job) { return fmt::format("timeline-{}.svg", job); }

void write_bench_plots(const Matrix& matrix, const std::vector<BenchRun>& runs,
                       const std::vector<std::string>& algorithms, const std::string& dir) {
  for (const auto& job : matrix.jobs) {
    write_timeline(job, runs, algorithms, (std::filesystem::path(dir) / timeline_file(job.id)).string());
  }
  write_oracle_chart(matrix, runs, algorithms, (std::filesystem::path(dir) / kOracleChartFile).string());
  if (has_searches(runs)) write_search_chart(matrix, runs, (std::filesystem::path(dir) / kSearchChartFile).string());
}

}  // namespace gpucap::bench
