#pragma once
// Reading JSON data files with errors that name the file, the line (syntax) or the key (content).

#include <nlohmann/json.hpp>

#include "gpucap/core/error.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace gpucap {

// Parses a JSON file (comments allowed); throws Error(io) or Error(invalid_data) "FILE:LINE: ...".
[[nodiscard]] nlohmann::json load_json_file(const std::string& path);

// A JSON value as text to send or write, never throwing: bytes that are not UTF-8 (a client's,
// quoted in an error message) become U+FFFD instead of nlohmann's type_error 316, which a server
// would turn into a 500 in place of the 4xx it meant to send.
[[nodiscard]] std::string to_json_text(const nlohmann::json& value, int indent = -1);

// Typed access to the keys of one JSON object, for validating data files.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string file, std::string context = {});

  [[nodiscard]] bool has(std::string_view key) const;
  [[nodiscard]] const nlohmann::json& at(std::string_view key) const;
  [[nodiscard]] std::string string(std::string_view key) const;
  [[nodiscard]] std::string string_or(std::string_view key, std::string fallback) const;
  [[nodiscard]] double number(std::string_view key) const;
  [[nodiscard]] double positive(std::string_view key) const;       // > 0
  [[nodiscard]] double non_negative(std::string_view key) const;   // >= 0
  [[nodiscard]] double fraction(std::string_view key) const;       // in (0, 1]
  // Optional keys: the fallback when absent, else the checked value.
  [[nodiscard]] double positive_or(std::string_view key, double fallback) const;
  [[nodiscard]] double non_negative_or(std::string_view key, double fallback) const;
  [[nodiscard]] long long integer(std::string_view key) const;
  [[nodiscard]] long long positive_integer(std::string_view key) const;
  [[nodiscard]] std::vector<double> numbers(std::string_view key) const;
  [[nodiscard]] std::vector<std::string> strings_or_empty(std::string_view key) const;
  [[nodiscard]] JsonFields object(std::string_view key) const;

  // An Error(invalid_data) "FILE: <context>key: message".
  [[nodiscard]] Error error(std::string_view key, std::string_view message) const;

 private:
  const nlohmann::json* object_;
  std::string file_;
  std::string context_;
};

}  // namespace gpucap
