#include "gpucap/monitor/exposition.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

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

const char* type_name(MetricType type) {
  switch (type) {
    case MetricType::counter: return "counter";
    case MetricType::histogram: return "histogram";
    case MetricType::gauge: break;
  }
  return "gauge";
}

// name{labels[,extra]} as the exposition writes a series.
std::string series_name(const std::string& name, const Labels& labels, const std::string& extra = {}) {
  std::string out = name;
  if (labels.empty() && extra.empty()) return out;
  out += '{';
  for (std::size_t i = 0; i < labels.size(); ++i) {
    out += fmt::format("{}{}=\"{}\"", i == 0 ? "" : ",", labels[i].first, escape(labels[i].second, true));
  }
  if (!extra.empty()) out += labels.empty() ? extra : "," + extra;
  out += '}';
  return out;
}

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
  if (type == MetricType::histogram) throw Error(ErrorCode::internal, fmt::format("metric {}: declare_histogram", name));
  const std::lock_guard lock(mutex_);
  declare_locked(name, type, help);
}

void MetricsRegistry::declare_locked(const std::string& name, MetricType type, const std::string& help) {
  if (!valid_name(name, true)) throw Error(ErrorCode::internal, fmt::format("invalid metric name '{}'", name));
  if (const auto it = index_.find(name); it != index_.end()) {
    if (families_[it->second].type != type) {
      throw Error(ErrorCode::internal, fmt::format("metric {} declared with two types", name));
    }
    return;
  }
  index_.emplace(name, families_.size());
  families_.push_back(Family{name, type, help, {}, {}, {}});
}

void MetricsRegistry::declare_histogram(const std::string& name, const std::string& help, std::vector<double> bounds) {
  if (bounds.empty() || !std::is_sorted(bounds.begin(), bounds.end()) ||
      std::adjacent_find(bounds.begin(), bounds.end()) != bounds.end() ||
      !std::all_of(bounds.begin(), bounds.end(), [](double b) { return std::isfinite(b); })) {
    throw Error(ErrorCode::internal, fmt::format("histogram {}: its bounds must be finite and ascending", name));
  }
  const std::lock_guard lock(mutex_);
  declare_locked(name, MetricType::histogram, help);
  family_locked(name).bounds = std::move(bounds);
}

void MetricsRegistry::observe(const std::string& name, const Labels& labels, double value) {
  const std::lock_guard lock(mutex_);
  auto& family = family_locked(name);
  if (family.type != MetricType::histogram) throw Error(ErrorCode::internal, fmt::format("metric {} is not a histogram", name));
  auto it = family.histograms.find(labels);
  if (it == family.histograms.end()) {
    check_labels(name, labels);
    it = family.histograms.emplace(labels, Histogram{std::vector<std::uint64_t>(family.bounds.size() + 1, 0), 0.0, 0}).first;
  }
  // The first bucket whose upper bound holds the value (le: less than or equal); NaN goes to +Inf.
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(family.bounds.begin(), family.bounds.end(), value) - family.bounds.begin());
  auto& h = it->second;
  h.counts[std::isnan(value) ? family.bounds.size() : bucket] += 1;
  h.sum += value;
  h.count += 1;
}

std::vector<std::pair<double, std::uint64_t>> MetricsRegistry::buckets(const std::string& name, const Labels& labels) const {
  const std::lock_guard lock(mutex_);
  const auto it = index_.find(name);
  if (it == index_.end()) return {};
  const auto& family = families_[it->second];
  const auto found = family.histograms.find(labels);
  if (found == family.histograms.end()) return {};
  std::vector<std::pair<double, std::uint64_t>> out;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < found->second.counts.size(); ++i) {
    cumulative += found->second.counts[i];
    out.emplace_back(i < family.bounds.size() ? family.bounds[i] : std::numeric_limits<double>::infinity(), cumulative);
  }
  return out;
}

MetricsRegistry::Family& MetricsRegistry::family_locked(const std::string& name) {
  const auto it = index_.find(name);
  if (it == index_.end()) throw Error(ErrorCode::internal, fmt::format("metric {} was not declared", name));
  return families_[it->second];
}

MetricsRegistry::Family& MetricsRegistry::scalar_family_locked(const std::string& name) {
  auto& family = family_locked(name);
  if (family.type == MetricType::histogram) throw Error(ErrorCode::internal, fmt::format("metric {} is a histogram", name));
  return family;
}

void MetricsRegistry::set(const std::string& name, const Labels& labels, double value) {
  const std::lock_guard lock(mutex_);
  auto& family = scalar_family_locked(name);
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
  scalar_family_locked(name).series.erase(labels);
}

void MetricsRegistry::add(const std::string& name, const Labels& labels, double delta) {
  const std::lock_guard lock(mutex_);
  auto& family = scalar_family_locked(name);
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
    if (family.type == MetricType::histogram) {
      render_histogram(family, out);
      continue;
    }
    for (const auto& [labels, value] : family.series) {
      out += series_name(family.name, labels);
      out += ' ';
      out += format_sample_value(value);
      out += '\n';
    }
  }
  return out;
}

void MetricsRegistry::render_histogram(const Family& family, std::string& out) {
  for (const auto& [labels, h] : family.histograms) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      const auto le = i < family.bounds.size() ? format_sample_value(family.bounds[i]) : std::string("+Inf");
      out += fmt::format("{} {}\n", series_name(family.name + "_bucket", labels, fmt::format("le=\"{}\"", le)), cumulative);
    }
    out += fmt::format("{} {}\n", series_name(family.name + "_sum", labels), format_sample_value(h.sum));
    out += fmt::format("{} {}\n", series_name(family.name + "_count", labels), h.count);
  }
}

}  // namespace gpucap::monitor
