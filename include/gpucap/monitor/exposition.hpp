#pragma once
// A thread-safe registry of metrics and its Prometheus text exposition (format 0.0.4): families
// of gauges and counters, each series a set of labels and a value, and histograms (cumulative
// buckets `_bucket{le}`, `_sum` and `_count` per set of labels, as Prometheus's clients write them). Producers (a run's window
// sink, a sampling loop, the BSO server's routes) set values from their threads; an exporter
// renders the whole registry on each scrape. Pure: no I/O, no clock.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gpucap::monitor {

// Label name and value, in the order they are printed.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { gauge, counter, histogram };

// The exposition's content type (what an exporter answers with).
inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

class MetricsRegistry {
 public:
  // Declares a family (printed in the order declared). Declaring it again with the same type is a
  // no-op; with another type, or a name or label that Prometheus does not allow, Error(internal).
  void declare(const std::string& name, MetricType type, const std::string& help);
  // Declares a histogram with its buckets' upper bounds (ascending, finite; +Inf is added).
  void declare_histogram(const std::string& name, const std::string& help, std::vector<double> bounds);
  // Counts one observation in a histogram's series (made empty when new).
  void observe(const std::string& name, const Labels& labels, double value);
  // A histogram series' cumulative counts: (upper bound, observations <= it), +Inf last; empty
  // when the series does not exist.
  [[nodiscard]] std::vector<std::pair<double, std::uint64_t>> buckets(const std::string& name, const Labels& labels) const;
  // Sets a series of a declared family (Error(internal) for an undeclared one).
  void set(const std::string& name, const Labels& labels, double value);
  // Sets a gauge whose value may be unknown: NaN removes the series, so an unknown figure is left
  // out of the exposition rather than exported as a number an alert would read.
  void set_if_known(const std::string& name, const Labels& labels, double value);
  // Adds to a series (from 0 when new); for counters.
  void add(const std::string& name, const Labels& labels, double delta);
  // The value of a series; 0 when it does not exist (tests, summaries).
  [[nodiscard]] double value(const std::string& name, const Labels& labels) const;
  // Every declared family with its series, in exposition format. A family without series is
  // printed with its HELP and TYPE only.
  [[nodiscard]] std::string render() const;

 private:
  struct Histogram {
    std::vector<std::uint64_t> counts;  // per bucket, not cumulative; the last is +Inf's
    double sum = 0.0;
    std::uint64_t count = 0;
  };
  struct Family {
    std::string name;
    MetricType type = MetricType::gauge;
    std::string help;
    std::map<Labels, double> series;
    std::vector<double> bounds;                  // histograms
    std::map<Labels, Histogram> histograms;
  };
  void declare_locked(const std::string& name, MetricType type, const std::string& help);
  static void render_histogram(const Family& family, std::string& out);
  Family& family_locked(const std::string& name);
  Family& scalar_family_locked(const std::string& name);  // a gauge or a counter

  mutable std::mutex mutex_;
  std::vector<Family> families_;
  std::map<std::string, std::size_t> index_;
};

// A sample value as the exposition writes it: shortest round-trip decimal, NaN, +Inf, -Inf.
[[nodiscard]] std::string format_sample_value(double value);
// A label value with backslash, double quote and newline escaped.
[[nodiscard]] std::string escape_label_value(const std::string& value);

}  // namespace gpucap::monitor
