#include "gpucap/monitor/exposition.hpp"

#include <fmt/format.h>

#include <cmath>

#include "gpucap/core/error.hpp"

namespace gpucap::monitor {
namespace {

bool name_char(char c, bool first, bool colon_allowed) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_allowed && c == ':');
  return letter || (!first && c >= '0' && c <= '9');
}

// [a-zA-Z_:][a-zA-Z0-9_:]* for metrics, without ':' for labels (Prometheus's data model).
bool valid_name(const std::string& name, bool colon_allowed) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i], i == 0, colon_allowed)) return false;
  }
  return true;
}

// Backslash and newline always; the double quote only inside a label value (HELP text keeps it).
std::string escape(const std::string& text, bool quotes) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || (quotes && c == '"')) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

const char* type_name(MetricType type) { return type == MetricType::counter ? "counter" : "gauge"; }

void check_labels(const std::string& family, const Labels& labels) {
  for (const auto& [name, value] : labels) {
    // Names starting with "__" are reserved for Prometheus itself.
    if (!valid_name(name, false) || name.starts_with("__")) {
      throw Error(ErrorCode::internal, fmt::format("metric {}: invalid label name '{}'", family, name));
    }
  }
}

}  // namespace

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

std::string escape_label_value(const std::string& value) { return escape(value, true); }

void MetricsRegistry::declare(const std::string& name, MetricType type, const std::string& help) {
  if (!valid_name(name, true)) throw Error(ErrorCode::internal, fmt::format("invalid metric name '{}'", name));
  const std::lock_guard lock(mutex_);
  if (const auto it = index_.find(name); it != index_.end()) {
    if (families_[it->second].type != type) {
      throw Error(ErrorCode::internal, fmt::format("metric {} declared as both gauge and counter", name));
    }
    return;
  }
  index_.emplace(name, families_.size());
  families_.push_back(Family{name, type, help, {}});
}

MetricsRegistry::Family& MetricsRegistry::family_locked(const std::string& name) {
  const auto it = index_.find(name);
  if (it == index_.end()) throw Error(ErrorCode::internal, fmt::format("metric {} was not declared", name));
  return families_[it->second];
}

void MetricsRegistry::set(const std::string& name, const Labels& labels, double value) {
  const std::lock_guard lock(mutex_);
  auto& family = family_locked(name);
  auto it = family.series.find(labels);
  if (it == family.series.end()) {
    check_labels(name, labels);
    family.series.emplace(labels, value);
    return;
  }
  it->second = value;
}

void MetricsRegistry::set_if_known(const std::string& name, const Labels& labels, double value) {
  if (!std::isnan(value)) {
    set(name, labels, value);
    return;
  }
  const std::lock_guard lock(mutex_);
  family_locked(name).series.erase(labels);
}

void MetricsRegistry::add(const std::string& name, const Labels& labels, double delta) {
  const std::lock_guard lock(mutex_);
  auto& family = family_locked(name);
  auto it = family.series.find(labels);
  if (it == family.series.end()) {
    check_labels(name, labels);
    family.series.emplace(labels, delta);
    return;
  }
  it->second += delta;
}

double MetricsRegistry::value(const std::string& name, const Labels& labels) const {
  const std::lock_guard lock(mutex_);
  const auto it = index_.find(name);
  if (it == index_.end()) return 0.0;
  const auto& series = families_[it->second].series;
  const auto found = series.find(labels);
  return found == series.end() ? 0.0 : found->second;
}

std::string MetricsRegistry::render() const {
  const std::lock_guard lock(mutex_);
  std::string out;
  out.reserve(256 * families_.size());
  for (const auto& family : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", family.name, escape(family.help, false), family.name,
                       type_name(family.type));
    for (const auto& [labels, value] : family.series) {
      out += family.name;
      if (!labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < labels.size(); ++i) {
          out += fmt::format("{}{}=\"{}\"", i == 0 ? "" : ",", labels[i].first, escape_label_value(labels[i].second));
        }
        out += '}';
      }
      out += ' ';
      out += format_sample_value(value);
      out += '\n';
    }
  }
  return out;
}

}  // namespace gpucap::monitor
