#pragma once
// A line-oriented reader for the numeric CSV logs gpucap consumes (P40 controller logs,
// traces). It keeps physical line numbers so every error names FILE:LINE, tolerates CRLF and
// blank padding around fields, and rejects quoted fields (none of these formats use quoting).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap {

struct CsvRow {
  std::size_t line = 0;                  // 1-based physical line number
  std::vector<std::string_view> fields;  // trimmed; valid while the reader lives
  [[nodiscard]] bool blank() const;      // no field has any text
};

class CsvReader {
 public:
  // Reads the whole file now; throws Error(io) if it cannot.
  explicit CsvReader(std::string path);

  [[nodiscard]] const std::string& path() const { return path_; }

  // Next physical line as a row; false at end of file.
  bool next(CsvRow& row);

  // Typed field access with FILE:LINE errors ("column 3 (power): 'x' is not a number").
  [[nodiscard]] double number(const CsvRow& row, std::size_t column, std::string_view name) const;
  [[nodiscard]] long long integer(const CsvRow& row, std::size_t column, std::string_view name) const;
  void require_column(const CsvRow& row, std::size_t column, std::string_view name) const;

 private:
  std::string path_;
  std::string content_;
  std::size_t offset_ = 0;
  std::size_t line_ = 0;
};

}  // namespace gpucap
