#include "gpucap/bench/zeus_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "gpucap/core/csv.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::bench {
namespace {

// Column positions by header name, so the files' column order does not matter.
class Columns {
 public:
  Columns(const CsvReader& reader, const CsvRow& header, const std::vector<std::string>& required) : reader_(reader) {
    for (std::size_t i = 0; i < header.fields.size(); ++i) index_[std::string(header.fields[i])] = i;
    for (const auto& name : required) {
      if (!index_.contains(name)) throw data_error(reader.path(), header.line, fmt::format("no column '{}'", name));
    }
  }
  [[nodiscard]] std::string_view text(const CsvRow& row, const std::string& name) const {
    const std::size_t i = index_.at(name);
    reader_.require_column(row, i, name);
    return row.fields[i];
  }
  [[nodiscard]] double number(const CsvRow& row, const std::string& name) const {
    return reader_.number(row, index_.at(name), name);
  }

 private:
  const CsvReader& reader_;
  std::map<std::string, std::size_t> index_;
};

bool same_metric(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

int whole_number(const CsvReader& reader, const CsvRow& row, double value, const char* name) {
  if (!(value >= 1.0) || value != std::floor(value) || value > 1e9) {
    throw data_error(reader.path(), row.line, fmt::format("{} must be a whole number >= 1, not {}", name, value));
  }
  return static_cast<int>(value);
}

std::string gpu_from_file_name(const std::string& power_csv) {
  const auto stem = std::filesystem::path(power_csv).stem().string();
  const std::string prefix = "summary_power_";
  return stem.starts_with(prefix) && stem.size() > prefix.size() ? stem.substr(prefix.size()) : "gpu";
}

std::pair<std::string, std::string> split_name(const std::string& workload) {
  const auto slash = workload.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == workload.size()) {
    throw usage_error(fmt::format("workload '{}' must be DATASET/NETWORK, e.g. librispeech/deepspeech2", workload));
  }
  return {workload.substr(0, slash), workload.substr(slash + 1)};
}

ZeusWorkloadDefaults resolve(const std::string& workload, const ZeusWorkloadOverrides& o) {
  ZeusWorkloadDefaults d;
  const auto& known = zeus_workloads();
  const auto it = std::find_if(known.begin(), known.end(), [&](const ZeusWorkloadDefaults& k) { return k.name == workload; });
  if (it != known.end()) {
    d = *it;
  } else {
    d.name = workload;
    if (!o.training_optimizer || !o.target_metric || !o.max_epochs || !o.default_batch_size) {
      std::vector<std::string> names;
      for (const auto& k : known) names.push_back(k.name);
      throw usage_error(fmt::format("workload '{}' has no built-in defaults ({}); give --training-optimizer, --target-metric, "
                                    "--max-epochs and --default-batch-size",
                                    workload, join(names, ", ")));
    }
  }
  if (o.training_optimizer) d.training_optimizer = *o.training_optimizer;
  if (o.target_metric) d.target_metric = *o.target_metric;
  if (o.higher_is_better) d.higher_is_better = *o.higher_is_better;
  if (o.max_epochs) d.max_epochs = *o.max_epochs;
  if (o.default_batch_size) d.default_batch_size = *o.default_batch_size;
  if (d.max_epochs < 1) throw usage_error("--max-epochs must be 1 or more");
  return d;
}

void read_train(const std::string& path, const ZeusWorkloadDefaults& d, const std::string& dataset, const std::string& network,
                bso::TraceWorkload& w) {
  CsvReader reader(path);
  CsvRow row;
  while (reader.next(row) && row.blank()) {
  }
  if (row.fields.empty()) throw data_error(path, 1, "empty file");
  const Columns col(reader, row, {"dataset", "network", "batch_size", "optimizer", "run", "target_metric", "target_epoch"});
  while (reader.next(row)) {
    if (row.blank()) continue;
    if (col.text(row, "dataset") != dataset || col.text(row, "network") != network ||
        col.text(row, "optimizer") != d.training_optimizer) {
      continue;
    }
    if (!same_metric(col.number(row, "target_metric"), d.target_metric)) continue;
    const int b = whole_number(reader, row, col.number(row, "batch_size"), "batch_size");
    const auto epoch_text = to_lower(trim(col.text(row, "target_epoch")));
    std::optional<int> epoch;
    if (epoch_text != "nan" && !epoch_text.empty()) {
      const auto value = parse_double(epoch_text);
      if (!value) throw data_error(path, row.line, fmt::format("target_epoch '{}' is not a number", epoch_text));
      epoch = whole_number(reader, row, *value, "target_epoch");
    }
    w.target_epochs[b].push_back(epoch);
  }
}

void read_power(const std::string& path, const ZeusWorkloadDefaults& d, const std::string& dataset, const std::string& network,
                bso::TraceWorkload& w) {
  for (const auto& row : load_zeus_power_rows(path)) {
    w.max_power_w = std::max(w.max_power_w, row.power_limit_w);  // the GPU's largest limit, over every job
    if (row.dataset != dataset || row.network != network || row.optimizer != d.training_optimizer) continue;
    if (!w.power[row.batch_size].emplace(row.power_limit_w, bso::TracePoint{row.time_per_epoch_s, row.average_power_w}).second) {
      throw data_error(path, row.line, fmt::format("a second row for batch size {} at {} W", row.batch_size, row.power_limit_w));
    }
  }
}

}  // namespace

std::vector<ZeusPowerRow> load_zeus_power_rows(const std::string& path) {
  CsvReader reader(path);
  CsvRow row;
  while (reader.next(row) && row.blank()) {
  }
  if (row.fields.empty()) throw data_error(path, 1, "empty file");
  const Columns col(reader, row,
                    {"dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"});
  std::vector<ZeusPowerRow> rows;
  while (reader.next(row)) {
    if (row.blank()) continue;
    ZeusPowerRow r;
    r.line = row.line;
    r.dataset = std::string(col.text(row, "dataset"));
    r.network = std::string(col.text(row, "network"));
    r.optimizer = std::string(col.text(row, "optimizer"));
    r.power_limit_w = col.number(row, "power_limit");
    if (!(r.power_limit_w > 0.0)) throw data_error(path, row.line, "power_limit must be positive");
    r.batch_size = whole_number(reader, row, col.number(row, "batch_size"), "batch_size");
    r.time_per_epoch_s = col.number(row, "time_per_epoch");
    r.average_power_w = col.number(row, "average_power");
    if (!(r.time_per_epoch_s > 0.0) || !(r.average_power_w > 0.0)) {
      throw data_error(path, row.line, "time_per_epoch and average_power must be positive");
    }
    rows.push_back(std::move(r));
  }
  if (rows.empty()) throw data_error(path, 1, "no rows");
  return rows;
}

std::string zeus_trace_gpu(const std::string& power_csv) { return gpu_from_file_name(power_csv); }

std::string zeus_power_trace_path(const std::string& traces_dir, const std::string& gpu) {
  return (std::filesystem::path(traces_dir) / fmt::format("summary_power_{}.csv", gpu)).string();
}

const std::vector<ZeusWorkloadDefaults>& zeus_workloads() {
  static const std::vector<ZeusWorkloadDefaults> workloads = {
      {"cifar100/shufflenetv2", "adadelta", 0.6, true, 100, 1024},
      {"imagenet/resnet50", "adadelta", 0.65, true, 100, 256},
      {"librispeech/deepspeech2", "adamw", 40.0, false, 16, 192},  // word error rate
      {"movielens-1m/ncf", "adam", 0.41, true, 100, 1024},
      {"squad/bert_base_uncased", "adamw", 84.0, true, 6, 32},  // F1
      {"sentiment140/bert_base_uncased", "adamw", 0.84, true, 10, 128},
  };
  return workloads;
}

const ZeusWorkloadDefaults& zeus_workload(const std::string& name) {
  for (const auto& w : zeus_workloads()) {
    if (w.name == name) return w;
  }
  std::vector<std::string> names;
  for (const auto& w : zeus_workloads()) names.push_back(w.name);
  throw usage_error(fmt::format("unknown workload '{}' (known: {})", name, join(names, ", ")));
}

bso::TraceWorkload load_zeus_workload(const std::string& train_csv, const std::string& power_csv, const std::string& workload,
                                      const ZeusWorkloadOverrides& overrides) {
  const auto [dataset, network] = split_name(workload);
  const auto d = resolve(workload, overrides);
  bso::TraceWorkload w;
  w.name = d.name;
  w.gpu = gpu_from_file_name(power_csv);
  w.training_optimizer = d.training_optimizer;
  w.target_metric = d.target_metric;
  w.higher_is_better = d.higher_is_better;
  w.max_epochs = d.max_epochs;
  w.default_batch_size = d.default_batch_size;
  read_train(train_csv, d, dataset, network, w);
  read_power(power_csv, d, dataset, network, w);
  // Zeus's simulator joins the two traces: a batch size needs runs and power figures.
  for (auto it = w.target_epochs.begin(); it != w.target_epochs.end();) {
    it = w.power.contains(it->first) ? std::next(it) : w.target_epochs.erase(it);
  }
  for (auto it = w.power.begin(); it != w.power.end();) {
    it = w.target_epochs.contains(it->first) ? std::next(it) : w.power.erase(it);
  }
  for (const auto& [b, runs] : w.target_epochs) w.batch_sizes.push_back(b);
  if (w.batch_sizes.empty()) {
    throw usage_error(fmt::format("workload {} ({} at target {}) has no batch size in both {} and {}", workload,
                                  d.training_optimizer, d.target_metric, train_csv, power_csv));
  }
  if (!w.power.contains(w.default_batch_size)) {
    throw usage_error(fmt::format("default batch size {} of {} is not in the traces (batch sizes: {})", w.default_batch_size,
                                  workload, fmt::join(w.batch_sizes, ", ")));
  }
  return w;
}

}  // namespace gpucap::bench
