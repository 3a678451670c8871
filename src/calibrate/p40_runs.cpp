#include "gpucap/calibrate/p40_runs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <set>

#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::calibrate {

namespace fs = std::filesystem;

namespace {

struct FileName {
  int job = 0;
  std::string dnn;
  bench::P40LogKind kind = bench::P40LogKind::batchdvfs;
};

// "01_InceptionV1_BatchDVFS" → job 1, "InceptionV1", batchdvfs.
FileName parse_file_name(const std::string& stem, const std::string& path) {
  const auto first = stem.find('_');
  const auto last = stem.rfind('_');
  const auto bad = [&] {
    return usage_error(fmt::format("{}: expected a name like 01_InceptionV1_BatchDVFS.csv (job, model, controller)",
                                   path));
  };
  if (first == std::string::npos || last == first) throw bad();
  const auto job = parse_integer(std::string_view(stem).substr(0, first));
  if (!job || *job < 1 || *job > 1000) throw bad();
  FileName name;
  name.job = static_cast<int>(*job);
  name.dnn = stem.substr(first + 1, last - first - 1);
  const auto approach = name_key(stem.substr(last + 1));
  if (approach == "batchdvfs") {
    name.kind = bench::P40LogKind::batchdvfs;
  } else if (approach == "clipper") {
    name.kind = bench::P40LogKind::clipper;
  } else if (approach == "dvfs" || approach == "dvfs256") {
    name.kind = bench::P40LogKind::dvfs;
  } else {
    throw bad();
  }
  return name;
}

double median(std::vector<double> values) {
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

// Clipper leaves the clock to the GPU: take what nvidia-smi saw while kernels ran during the step,
// else around it, else the boost clock.
std::vector<double> observed_clocks(const P40Run& run, double boost_mhz) {
  std::vector<double> clocks(run.log.rows.size(), boost_mhz);
  std::size_t s = 0;
  for (std::size_t i = 1; i < run.log.rows.size(); ++i) {
    const double start = run.log.rows[i - 1].time_s;
    const double end = run.log.rows[i].time_s;
    while (s < run.smi.size() && run.smi[s].time_s < start) ++s;
    std::vector<double> busy;
    for (std::size_t k = s; k < run.smi.size() && run.smi[k].time_s <= end; ++k) {
      if (run.smi[k].gpu_util_pct > 0.0) busy.push_back(run.smi[k].sm_clock_mhz);
    }
    if (!busy.empty()) {
      clocks[i] = median(busy);
    } else {
      clocks[i] = clocks[i - 1];
    }
  }
  clocks[0] = run.log.rows.size() > 1 ? clocks[1] : boost_mhz;
  return clocks;
}

std::vector<bool> windows_closed(const bench::P40Log& log, double window_s) {
  std::vector<bool> closed(log.rows.size(), false);
  double last = -std::numeric_limits<double>::infinity();  // the first row closes a window (see replay)
  for (std::size_t i = 0; i < log.rows.size(); ++i) {
    if (log.rows[i].time_s - last > window_s) {
      closed[i] = true;
      last = log.rows[i].time_s;
    }
  }
  return closed;
}

}  // namespace

std::vector<P40Run> load_p40_runs(const std::string& dir, const sim::Catalog& catalog, double window_s) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(ErrorCode::io, fmt::format("{}: not a folder", dir));
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".csv") continue;
    if (entry.path().parent_path().filename() == "nvidia-smi") continue;
    // Controller logs start with their job number ("01_..."); other CSV files (runtimes.csv) are not logs.
    const auto stem = entry.path().stem().string();
    if (stem.empty() || std::isdigit(static_cast<unsigned char>(stem.front())) == 0) continue;
    files.push_back(entry.path().string());
  }
  if (ec) throw Error(ErrorCode::io, fmt::format("{}: cannot list ({})", dir, ec.message()));
  std::sort(files.begin(), files.end());
  if (files.empty()) throw Error(ErrorCode::invalid_data, fmt::format("{}: no controller logs (*.csv)", dir));

  std::vector<P40Run> runs;
  for (const auto& file : files) {
    const fs::path path(file);
    const auto name = parse_file_name(path.stem().string(), file);
    P40Run run;
    run.path = file;
    run.name = path.stem().string();
    run.job = name.job;
    run.model = catalog.model(name.dnn).id;
    run.dataset = name.job <= 15 ? "imagenet" : "caltech256";
    run.log = bench::read_p40_log(file, name.kind);
    const auto smi_path = path.parent_path() / "nvidia-smi" / (run.name + ".txt_nvidiasmi_output.csv");
    if (fs::exists(smi_path, ec)) {
      run.smi = bench::read_nvidia_smi_log(smi_path.string());
      const double offset = bench::smi_time_offset_s(run.smi, run.log);
      for (auto& sample : run.smi) sample.time_s += offset;
    }
    if (name.kind == bench::P40LogKind::clipper) {
      run.clock_mhz = observed_clocks(run, catalog.gpu("p40").boost_clock_mhz);
    } else {
      for (const auto& row : run.log.rows) run.clock_mhz.push_back(*row.clock_mhz);
    }
    run.window_closed = windows_closed(run.log, window_s);
    std::set<int> seen;  // row 0 (graph loading) already ran its batch size
    for (const auto& row : run.log.rows) run.new_batch_size.push_back(seen.insert(row.batch_size).second);
    if (!run.new_batch_size.empty()) run.new_batch_size.front() = false;
    runs.push_back(std::move(run));
  }
  return runs;
}

std::optional<double> gpu_chosen_sm_clock_mhz(const P40Run& run) {
  std::vector<double> busy;
  for (const auto& s : run.smi) {
    if (s.gpu_util_pct > 0.0) busy.push_back(s.sm_clock_mhz);
  }
  if (busy.empty()) return std::nullopt;
  return median(std::move(busy));
}

}  // namespace gpucap::calibrate
