#include "gpucap/bench/p40_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "gpucap/core/csv.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap::bench {

const char* to_string(P40LogKind kind) {
  switch (kind) {
    case P40LogKind::batchdvfs: return "batchdvfs";
    case P40LogKind::clipper: return "clipper";
    case P40LogKind::dvfs: return "dvfs";
  }
  return "?";
}

P40LogKind parse_p40_log_kind(std::string_view name) {
  const auto key = name_key(name);
  if (key == "batchdvfs") return P40LogKind::batchdvfs;
  if (key == "clipper") return P40LogKind::clipper;
  if (key == "dvfs" || key == "dvfs256") return P40LogKind::dvfs;
  throw usage_error(fmt::format("replay supports batchdvfs, clipper and dvfs logs, not '{}'", name));
}

namespace {

struct Columns {
  std::size_t time = 0, throughput = 0, power = 0, cap = 0, batch = 0;
  std::optional<std::size_t> min_bs, max_bs, best_bs, dvfs;
};

std::optional<std::size_t> find_column(const CsvRow& header, std::initializer_list<std::string_view> names) {
  for (std::size_t i = 0; i < header.fields.size(); ++i) {
    const auto key = name_key(header.fields[i]);
    for (const auto name : names) {
      if (key == name) return i;
    }
  }
  return std::nullopt;
}

std::size_t require_column(const CsvReader& reader, const CsvRow& header, P40LogKind kind,
                           std::initializer_list<std::string_view> names, std::string_view label) {
  const auto column = find_column(header, names);
  if (!column) {
    throw data_error(reader.path(), header.line,
                     fmt::format("missing column '{}' (is this a {} log?)", label, to_string(kind)));
  }
  return *column;
}

Columns find_columns(const CsvReader& reader, const CsvRow& header, P40LogKind kind) {
  Columns c;
  c.time = require_column(reader, header, kind, {"timestamp"}, "time stamp");
  // Upstream spells it "Througput (image/sec)".
  c.throughput = require_column(reader, header, kind, {"througputimagesec", "throughputimagesec", "throughput"},
                                "Througput (image/sec)");
  c.power = require_column(reader, header, kind, {"power"}, "power");
  c.cap = require_column(reader, header, kind, {"powercap"}, "power cap");
  c.batch = require_column(reader, header, kind, {"batchsize"}, "batch size");
  if (kind == P40LogKind::batchdvfs) {
    c.min_bs = require_column(reader, header, kind, {"minbs"}, "minBS");
    c.max_bs = require_column(reader, header, kind, {"maxbs"}, "maxBS");
  }
  if (kind != P40LogKind::dvfs) c.best_bs = require_column(reader, header, kind, {"bestbs"}, "BestBS");
  if (kind != P40LogKind::clipper) c.dvfs = require_column(reader, header, kind, {"dvfs"}, "DVFS");
  return c;
}

int index_field(const CsvReader& reader, const CsvRow& row, std::size_t column, std::string_view name) {
  const auto value = reader.integer(row, column, name);
  if (value < 0 || value > 1'000'000) {
    throw data_error(reader.path(), row.line, fmt::format("{} {} is out of range", name, value));
  }
  return static_cast<int>(value);
}

P40LogRow parse_row(const CsvReader& reader, const CsvRow& row, const Columns& c) {
  P40LogRow r;
  r.line = row.line;
  r.time_s = reader.number(row, c.time, "time stamp");
  r.throughput_img_s = reader.number(row, c.throughput, "throughput");
  r.power_w = reader.number(row, c.power, "power");
  r.cap_w = reader.number(row, c.cap, "power cap");
  const auto batch = reader.integer(row, c.batch, "batch size");
  if (batch < 1 || batch > 1'000'000) {
    throw data_error(reader.path(), row.line, fmt::format("batch size {} is out of range", batch));
  }
  r.batch_size = static_cast<int>(batch);
  if (r.power_w < 0.0) throw data_error(reader.path(), row.line, "power is negative");
  if (r.cap_w <= 0.0) throw data_error(reader.path(), row.line, "power cap must be > 0");
  if (c.min_bs) r.min_index = index_field(reader, row, *c.min_bs, "minBS");
  if (c.max_bs) r.max_index = index_field(reader, row, *c.max_bs, "maxBS");
  if (c.best_bs) r.best_index = index_field(reader, row, *c.best_bs, "BestBS");
  if (c.dvfs) {
    r.clock_mhz = reader.number(row, *c.dvfs, "DVFS");
    if (*r.clock_mhz <= 0.0) throw data_error(reader.path(), row.line, "DVFS clock must be > 0 MHz");
  }
  return r;
}

}  // namespace

namespace {
// Upstream ends its logs with a blank line and a summary block whose rows start with an empty
// field (" ,min, ..."). Anything else after the data means a damaged log, not its end.
void expect_only_summary(CsvReader& reader, std::size_t data_end_line) {
  CsvRow row;
  while (reader.next(row)) {
    if (row.blank() || row.fields.front().empty()) continue;
    throw data_error(reader.path(), row.line,
                     fmt::format("data continues after the blank line at line {} (a damaged log?)", data_end_line));
  }
}
}  // namespace

P40Log read_p40_log(const std::string& path, P40LogKind kind) {
  CsvReader reader(path);
  P40Log log;
  log.path = path;
  log.kind = kind;
  CsvRow header;
  if (!reader.next(header) || header.blank()) throw data_error(path, 1, "empty file: expected a header line");
  const auto columns = find_columns(reader, header, kind);

  CsvRow row;
  while (reader.next(row)) {
    // The data ends at a blank line; upstream appends a summary block (" ,min, ...") after it.
    if (row.blank() || row.fields.front().empty()) {
      expect_only_summary(reader, row.line);
      break;
    }
    auto parsed = parse_row(reader, row, columns);
    if (!log.rows.empty() && parsed.time_s < log.rows.back().time_s) {
      throw data_error(path, row.line, "time stamp goes backwards");
    }
    log.rows.push_back(parsed);
  }
  if (log.rows.empty()) throw data_error(path, 0, "no data rows after the header");
  return log;
}

namespace {

// "12 %" / "12" / "9.81 W" → the number; the unit, if any, must be the expected one.
double number_with_unit(const CsvReader& reader, const CsvRow& row, std::size_t column, std::string_view name,
                        std::string_view unit) {
  reader.require_column(row, column, name);
  auto text = row.fields[column];
  if (text.size() >= unit.size() && text.substr(text.size() - unit.size()) == unit) {
    text = trim(text.substr(0, text.size() - unit.size()));
  }
  const auto value = parse_double(text);
  if (!value || *value < 0.0) {
    throw data_error(reader.path(), row.line,
                     fmt::format("column {} ({}): '{}' is not a non-negative number", column + 1, name,
                                 row.fields[column]));
  }
  return *value;
}

// "2020/12/22 16:27:13.789" → seconds since 1970 reading the stamp as UTC.
std::optional<double> parse_smi_timestamp(std::string_view text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0;
  double second = 0.0;
  const std::string copy(text);
  char tail = 0;
  if (std::sscanf(copy.c_str(), "%4d/%2d/%2d %2d:%2d:%lf%c", &year, &month, &day, &hour, &minute, &second, &tail) !=
      6) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second < 0.0 || second >= 61.0) {
    return std::nullopt;
  }
  // Days from the civil date (proleptic Gregorian), as in H. Hinnant's days_from_civil.
  const int y = year - (month <= 2 ? 1 : 0);
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const long long days = static_cast<long long>(era) * 146097 + doe - 719468;
  return static_cast<double>(days) * 86400.0 + hour * 3600.0 + minute * 60.0 + second;
}

}  // namespace

std::vector<SmiSample> read_nvidia_smi_log(const std::string& path) {
  CsvReader reader(path);
  CsvRow row;
  if (!reader.next(row) || row.blank()) throw data_error(path, 1, "empty file: expected a header line");
  if (name_key(row.fields.front()) != "timestamp" || row.fields.size() < 5) {
    throw data_error(path, row.line,
                     "expected the header 'timestamp, utilization.gpu [%], utilization.memory [%], power.draw [W], "
                     "clocks.current.sm [MHz]'");
  }
  std::vector<SmiSample> samples;
  while (reader.next(row)) {
    if (row.blank() || row.fields.front().empty()) {  // the summary block
      expect_only_summary(reader, row.line);
      break;
    }
    SmiSample s;
    s.line = row.line;
    const auto time = parse_smi_timestamp(row.fields.front());
    if (!time) throw data_error(path, row.line, fmt::format("'{}' is not a YYYY/MM/DD HH:MM:SS.sss time", row.fields[0]));
    s.time_s = *time;
    s.gpu_util_pct = number_with_unit(reader, row, 1, "utilization.gpu", "%");
    s.mem_util_pct = number_with_unit(reader, row, 2, "utilization.memory", "%");
    s.power_w = number_with_unit(reader, row, 3, "power.draw", "W");
    s.sm_clock_mhz = number_with_unit(reader, row, 4, "clocks.sm", "MHz");
    if (!samples.empty() && s.time_s < samples.back().time_s) throw data_error(path, row.line, "time goes backwards");
    samples.push_back(s);
  }
  if (samples.empty()) throw data_error(path, 0, "no samples after the header");
  return samples;
}

double smi_time_offset_s(const std::vector<SmiSample>& smi, const P40Log& log) {
  double best_offset = 0.0;
  double best_gap = std::numeric_limits<double>::infinity();
  for (int hours = -14; hours <= 14; ++hours) {
    const double offset = hours * 3600.0;
    const double gap = std::abs(smi.front().time_s + offset - log.rows.front().time_s) +
                       std::abs(smi.back().time_s + offset - log.rows.back().time_s);
    if (gap < best_gap) {
      best_gap = gap;
      best_offset = offset;
    }
  }
  return best_offset;
}

}  // namespace gpucap::bench
