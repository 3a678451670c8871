// The profile CSV of PctoDL's profiler (seed-systems.md §2.3), as gpucap profile writes it too:
// model_name,p_list,b_list,target_freq,mem_freq,sm_freq,sm_util,mem_util,throughput_total,power_avg,power_max
// with the lists as Python reprs in quotes ("[50, 25]"). core/csv.hpp rejects quoting, so this
// reader splits the fields itself (RFC 4180 quoting, "" for a quote inside quotes).

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/predict/fitted.hpp"

namespace gpucap::predict {

namespace {

// Splits one line into fields; Error(invalid_data) for a malformed quote.
std::vector<std::string> split_fields(std::string_view line, const std::string& path, std::size_t line_no) {
  std::vector<std::string> fields;
  std::string field;
  std::size_t i = 0;
  for (;;) {
    field.clear();
    // Leading blanks before a quoted field are allowed ("a, \"[1, 2]\"").
    std::size_t start = i;
    while (start < line.size() && (line[start] == ' ' || line[start] == '\t')) ++start;
    if (start < line.size() && line[start] == '"') {
      std::size_t j = start + 1;
      bool closed = false;
      while (j < line.size()) {
        if (line[j] == '"') {
          if (j + 1 < line.size() && line[j + 1] == '"') {
            field += '"';
            j += 2;
            continue;
          }
          closed = true;
          ++j;
          break;
        }
        field += line[j++];
      }
      if (!closed) throw data_error(path, line_no, fmt::format("field {}: unterminated quote", fields.size() + 1));
      while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
      if (j < line.size() && line[j] != ',') {
        throw data_error(path, line_no, fmt::format("field {}: text after the closing quote", fields.size() + 1));
      }
      fields.push_back(field);
      if (j >= line.size()) break;
      i = j + 1;
      continue;
    }
    auto end = line.find(',', i);
    if (end == std::string_view::npos) end = line.size();
    const auto text = line.substr(i, end - i);
    if (text.find('"') != std::string_view::npos) {
      throw data_error(path, line_no, fmt::format("field {}: a quote inside an unquoted field", fields.size() + 1));
    }
    fields.emplace_back(trim(text));
    if (end >= line.size()) break;
    i = end + 1;
  }
  return fields;
}

// "[50, 25]", "[50,25]", "(50, 25)", "50;25", "50" → numbers; "[]" → empty; nullopt if malformed.
std::optional<std::vector<double>> parse_list(std::string_view text) {
  text = trim(text);
  if (text.size() >= 2 && ((text.front() == '[' && text.back() == ']') || (text.front() == '(' && text.back() == ')'))) {
    text = trim(text.substr(1, text.size() - 2));
  }
  std::vector<double> values;
  if (text.empty()) return values;
  const char separator = text.find(';') != std::string_view::npos ? ';' : ',';
  auto items = split(text, separator);
  // A Python tuple of one: "(50,)".
  if (items.size() > 1 && trim(items.back()).empty()) items.pop_back();
  for (const auto item : items) {
    const auto value = parse_double(item);
    if (!value) return std::nullopt;
    values.push_back(*value);
  }
  return values;
}

enum Column : std::size_t {
  kModel,
  kShares,
  kBatches,
  kTarget,
  kMemory,
  kSm,
  kSmUtil,
  kMemUtil,
  kThroughput,
  kPowerAvg,
  kPowerMax,
  kColumns
};

constexpr std::array<const char*, kColumns> kColumnNames = {
    "model_name", "p_list",   "b_list",           "target_freq", "mem_freq", "sm_freq",
    "sm_util",    "mem_util", "throughput_total", "power_avg",   "power_max"};

class RowParser {
 public:
  RowParser(std::string path, std::size_t line, const std::vector<std::string>& fields,
            const std::array<std::optional<std::size_t>, kColumns>& index)
      : path_(std::move(path)), line_(line), fields_(fields), index_(index) {}

  [[nodiscard]] Error error(Column column, const std::string& message) const {
    return data_error(path_, line_, fmt::format("column {}: {}", kColumnNames[column], message));
  }

  [[nodiscard]] std::optional<std::string_view> text(Column column) const {
    if (!index_[column]) return std::nullopt;
    return std::string_view(fields_[*index_[column]]);
  }

  // A non-negative number; 0 when the column is absent or the field empty and `optional`.
  [[nodiscard]] double number(Column column, bool optional) const {
    const auto field = text(column);
    if (!field || trim(*field).empty()) {
      if (optional) return 0.0;
      throw error(column, "is empty");
    }
    const auto value = parse_double(*field);
    if (!value) throw error(column, fmt::format("'{}' is not a number", *field));
    if (*value < 0.0) throw error(column, fmt::format("{:g} must not be negative", *value));
    return *value;
  }

  [[nodiscard]] std::vector<double> list(Column column) const {
    const auto field = text(column);
    const auto values = parse_list(*field);
    if (!values) throw error(column, fmt::format("'{}' is not a list of numbers like \"[50, 25]\" or 50;25", *field));
    return *values;
  }

 private:
  std::string path_;
  std::size_t line_;
  const std::vector<std::string>& fields_;
  const std::array<std::optional<std::size_t>, kColumns>& index_;
};

ProfileRow parse_row(const RowParser& p, const std::string& path, std::size_t line) {
  ProfileRow row;
  row.source = fmt::format("{}:{}", path, line);
  row.model = std::string(trim(*p.text(kModel)));
  if (row.model.empty()) throw p.error(kModel, "is empty");
  row.shares_pct = p.list(kShares);
  const auto batches = p.list(kBatches);
  if (row.shares_pct.size() != batches.size()) {
    throw p.error(kBatches, fmt::format("lists {} batch sizes but p_list lists {} MPS shares", batches.size(),
                                        row.shares_pct.size()));
  }
  double total = 0.0;
  for (const double share : row.shares_pct) {
    if (!(share > 0.0 && share <= 100.0)) throw p.error(kShares, fmt::format("MPS share {:g} must be in (0, 100]", share));
    total += share;
  }
  if (total > 100.0 + 1e-6) throw p.error(kShares, fmt::format("MPS shares add up to {:g} %, more than 100 %", total));
  for (const double b : batches) {
    if (!(b >= 1.0 && b <= 1e6 && b == std::floor(b))) {
      throw p.error(kBatches, fmt::format("batch size {:g} must be a whole number >= 1", b));
    }
    row.batches.push_back(static_cast<int>(b));
  }
  row.target_sm_clock_mhz = p.number(kTarget, true);
  row.memory_clock_mhz = p.number(kMemory, false);
  row.sm_clock_mhz = p.number(kSm, true);
  row.sm_util_pct = p.number(kSmUtil, true);
  row.mem_util_pct = p.number(kMemUtil, true);
  row.throughput_img_s = p.number(kThroughput, false);
  row.power_avg_w = p.number(kPowerAvg, true);
  row.power_max_w = p.number(kPowerMax, false);
  if (!row.oom()) {
    if (row.idle()) throw p.error(kThroughput, "a row without tenants cannot have a throughput");
    if (!(row.power_max_w > 0.0)) throw p.error(kPowerMax, "must be > 0 in a row with a throughput");
    if (!(row.clock_mhz() > 0.0)) throw p.error(kSm, "the row has a throughput but neither sm_freq nor target_freq");
    if (!(row.memory_clock_mhz > 0.0)) throw p.error(kMemory, "must be > 0 in a row with a throughput");
  }
  return row;
}

}  // namespace

std::vector<ProfileRow> read_profile_csv(const std::string& path) {
  const auto content = read_text_file(path);
  const std::string_view all(content);
  std::vector<ProfileRow> rows;
  std::array<std::optional<std::size_t>, kColumns> index{};
  std::size_t header_fields = 0;
  bool have_header = false;
  std::size_t offset = 0, line_no = 0;
  while (offset < all.size()) {
    auto end = all.find('\n', offset);
    if (end == std::string_view::npos) end = all.size();
    auto line = all.substr(offset, end - offset);
    offset = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim(line).empty()) continue;
    const auto fields = split_fields(line, path, line_no);
    if (!have_header) {
      have_header = true;
      header_fields = fields.size();
      for (std::size_t i = 0; i < fields.size(); ++i) {
        for (std::size_t c = 0; c < kColumns; ++c) {
          if (fields[i] == kColumnNames[c]) {
            if (index[c]) throw data_error(path, line_no, fmt::format("column {} appears twice", kColumnNames[c]));
            index[c] = i;
          }
        }
      }
      for (const Column c : {kModel, kShares, kBatches, kMemory, kThroughput, kPowerMax}) {
        if (!index[c]) {
          throw data_error(path, line_no,
                           fmt::format("the header has no column {} (a profile needs model_name, p_list, b_list, "
                                       "mem_freq, sm_freq or target_freq, throughput_total, power_max)",
                                       kColumnNames[c]));
        }
      }
      if (!index[kSm] && !index[kTarget]) {
        throw data_error(path, line_no, "the header has neither sm_freq nor target_freq");
      }
      continue;
    }
    if (fields.size() != header_fields) {
      throw data_error(path, line_no,
                       fmt::format("{} fields, but the header has {} columns", fields.size(), header_fields));
    }
    rows.push_back(parse_row(RowParser(path, line_no, fields, index), path, line_no));
  }
  if (!have_header) throw data_error(path, 0, "empty file: expected a header and profile rows");
  if (rows.empty()) throw data_error(path, 0, "no profile rows after the header");
  return rows;
}

}  // namespace gpucap::predict
