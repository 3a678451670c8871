#include "gpucap/core/csv.hpp"

#include <fmt/format.h>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap {

bool CsvRow::blank() const {
  for (const auto field : fields) {
    if (!field.empty()) return false;
  }
  return true;
}

CsvReader::CsvReader(std::string path) : path_(std::move(path)), content_(read_text_file(path_)) {}

bool CsvReader::next(CsvRow& row) {
  if (offset_ >= content_.size()) return false;
  const std::string_view all(content_);
  auto end = all.find('\n', offset_);
  if (end == std::string_view::npos) end = all.size();
  const auto text = all.substr(offset_, end - offset_);
  offset_ = end + 1;
  ++line_;
  if (text.find('"') != std::string_view::npos) {
    throw data_error(path_, line_, "quoted fields are not supported in this format");
  }
  row.line = line_;
  row.fields.clear();
  for (const auto field : split(text, ',')) row.fields.push_back(trim(field));
  return true;
}

void CsvReader::require_column(const CsvRow& row, std::size_t column, std::string_view name) const {
  if (row.fields.size() <= column) {
    throw data_error(path_, row.line, fmt::format("missing column {} ({}): the row has {} columns", column + 1, name,
                                                  row.fields.size()));
  }
}

double CsvReader::number(const CsvRow& row, std::size_t column, std::string_view name) const {
  require_column(row, column, name);
  const auto value = parse_double(row.fields[column]);
  if (!value) {
    throw data_error(path_, row.line,
                     fmt::format("column {} ({}): '{}' is not a number", column + 1, name, row.fields[column]));
  }
  return *value;
}

long long CsvReader::integer(const CsvRow& row, std::size_t column, std::string_view name) const {
  require_column(row, column, name);
  const auto value = parse_integer(row.fields[column]);
  if (!value) {
    throw data_error(path_, row.line,
                     fmt::format("column {} ({}): '{}' is not an integer", column + 1, name, row.fields[column]));
  }
  return *value;
}

}  // namespace gpucap
