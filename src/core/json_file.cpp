#include "gpucap/core/json_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"

namespace gpucap {

namespace {
std::size_t line_of_byte(const std::string& text, std::size_t byte) {
  const auto end = std::min(byte, text.size());
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
}
}  // namespace

std::string to_json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json load_json_file(const std::string& path) {
  const auto text = read_text_file(path);
  try {
    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() repeats the position; keep only nlohmann's description after the last ": ".
    std::string reason = e.what();
    if (const auto colon = reason.rfind(": "); colon != std::string::npos) reason = reason.substr(colon + 2);
    throw data_error(path, line_of_byte(text, e.byte), "invalid JSON: " + reason);
  } catch (const nlohmann::json::exception& e) {
    // e.g. a number too large for a double (out_of_range.406)
    std::string reason = e.what();
    if (const auto bracket = reason.find("] "); bracket != std::string::npos) reason = reason.substr(bracket + 2);
    throw data_error(path, 0, "invalid JSON: " + reason);
  }
}

JsonFields::JsonFields(const nlohmann::json& object, std::string file, std::string context)
    : object_(&object), file_(std::move(file)), context_(std::move(context)) {
  if (!object.is_object()) throw data_error(file_, 0, context_ + "expected a JSON object");
}

Error JsonFields::error(std::string_view key, std::string_view message) const {
  return data_error(file_, 0, fmt::format("{}{}: {}", context_, key, message));
}

bool JsonFields::has(std::string_view key) const { return object_->contains(key); }

const nlohmann::json& JsonFields::at(std::string_view key) const {
  const auto it = object_->find(key);
  if (it == object_->end()) throw data_error(file_, 0, fmt::format("missing key '{}{}'", context_, key));
  return *it;
}

std::string JsonFields::string(std::string_view key) const {
  const auto& value = at(key);
  if (!value.is_string() || value.get<std::string>().empty()) throw error(key, "must be a non-empty string");
  return value.get<std::string>();
}

std::string JsonFields::string_or(std::string_view key, std::string fallback) const {
  return has(key) ? string(key) : std::move(fallback);
}

double JsonFields::number(std::string_view key) const {
  const auto& value = at(key);
  if (!value.is_number() || !std::isfinite(value.get<double>())) throw error(key, "must be a number");
  return value.get<double>();
}

double JsonFields::positive(std::string_view key) const {
  const double value = number(key);
  if (value <= 0.0) throw error(key, fmt::format("must be > 0, got {:g}", value));
  return value;
}

double JsonFields::non_negative(std::string_view key) const {
  const double value = number(key);
  if (value < 0.0) throw error(key, fmt::format("must be >= 0, got {:g}", value));
  return value;
}

double JsonFields::fraction(std::string_view key) const {
  const double value = number(key);
  if (value <= 0.0 || value > 1.0) throw error(key, fmt::format("must be in (0, 1], got {:g}", value));
  return value;
}

double JsonFields::positive_or(std::string_view key, double fallback) const {
  return has(key) ? positive(key) : fallback;
}

double JsonFields::non_negative_or(std::string_view key, double fallback) const {
  return has(key) ? non_negative(key) : fallback;
}

long long JsonFields::integer(std::string_view key) const {
  const auto& value = at(key);
  if (!value.is_number_integer()) throw error(key, "must be an integer");
  if (value.is_number_unsigned() && value.get<unsigned long long>() > static_cast<unsigned long long>(LLONG_MAX)) {
    throw error(key, "is too large");
  }
  return value.get<long long>();
}

long long JsonFields::positive_integer(std::string_view key) const {
  const auto value = integer(key);
  if (value <= 0) throw error(key, fmt::format("must be > 0, got {}", value));
  return value;
}

std::vector<double> JsonFields::numbers(std::string_view key) const {
  const auto& value = at(key);
  if (!value.is_array() || value.empty()) throw error(key, "must be a non-empty array of numbers");
  std::vector<double> result;
  for (const auto& item : value) {
    if (!item.is_number() || !std::isfinite(item.get<double>())) throw error(key, "must contain only numbers");
    result.push_back(item.get<double>());
  }
  return result;
}

std::vector<std::string> JsonFields::strings_or_empty(std::string_view key) const {
  if (!has(key)) return {};
  const auto& value = at(key);
  if (!value.is_array()) throw error(key, "must be an array of strings");
  std::vector<std::string> result;
  for (const auto& item : value) {
    if (!item.is_string()) throw error(key, "must contain only strings");
    result.push_back(item.get<std::string>());
  }
  return result;
}

JsonFields JsonFields::object(std::string_view key) const {
  const auto& value = at(key);
  if (!value.is_object()) throw error(key, "must be an object");
  return JsonFields(value, file_, fmt::format("{}{}.", context_, key));
}

}  // namespace gpucap
