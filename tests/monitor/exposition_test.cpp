// The registry and its Prometheus text: families in order, escaping, special values, counters;
// gpucap's work metrics on top of it. promtool checks the whole text end to end (cli tests).

#include "gpucap/monitor/exposition.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gpucap/core/error.hpp"
#include "gpucap/monitor/work_metrics.hpp"

namespace gpucap::monitor {
namespace {

TEST(Exposition, RendersHelpTypeAndSeriesInDeclarationOrder) {
  MetricsRegistry registry;
  registry.declare("b_watts", MetricType::gauge, "Second declared.");
  registry.declare("a_total", MetricType::counter, "First alphabetically.");
  registry.set("b_watts", {{"gpu", "0"}}, 150.5);
  registry.add("a_total", {}, 2.0);
  registry.add("a_total", {}, 3.0);
  EXPECT_EQ(registry.render(),
            "# HELP b_watts Second declared.\n# TYPE b_watts gauge\nb_watts{gpu=\"0\"} 150.5\n"
            "# HELP a_total First alphabetically.\n# TYPE a_total counter\na_total 5\n");
  EXPECT_DOUBLE_EQ(registry.value("a_total", {}), 5.0);
  EXPECT_DOUBLE_EQ(registry.value("b_watts", {{"gpu", "1"}}), 0.0);
}

TEST(Exposition, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  registry.declare("x", MetricType::gauge, "back\\slash and\nnewline");
  registry.set("x", {{"model", "a\"b\\c\nd"}}, 1.0);
  EXPECT_EQ(registry.render(), "# HELP x back\\\\slash and\\nnewline\n# TYPE x gauge\nx{model=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(Exposition, WritesSpecialValuesAsPrometheusDoes) {
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_sample_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_sample_value(1e21), "1e+21");
  EXPECT_EQ(format_sample_value(0.1), "0.1");
}

TEST(Exposition, RefusesBadNamesUndeclaredFamiliesAndTypeChanges) {
  MetricsRegistry registry;
  EXPECT_THROW(registry.declare("9lives", MetricType::gauge, ""), Error);
  EXPECT_THROW(registry.declare("has space", MetricType::gauge, ""), Error);
  registry.declare("ok", MetricType::gauge, "");
  EXPECT_NO_THROW(registry.declare("ok", MetricType::gauge, "again"));
  EXPECT_THROW(registry.declare("ok", MetricType::counter, ""), Error);
  EXPECT_THROW(registry.set("missing", {}, 1.0), Error);
  EXPECT_THROW(registry.set("ok", {{"__reserved", "x"}}, 1.0), Error);
  EXPECT_THROW(registry.set("ok", {{"a:b", "x"}}, 1.0), Error);
}

TEST(Exposition, AHistogramHasCumulativeBucketsASumAndACountPerSeries) {
  MetricsRegistry registry;
  registry.declare_histogram("d_seconds", "Durations.", {0.125, 0.5});
  const Labels shed = {{"outcome", "shed"}};
  for (const double v : {0.0625, 0.125, 0.25, 2.0}) registry.observe("d_seconds", shed, v);
  registry.observe("d_seconds", {{"outcome", "success"}}, 0.375);
  // A value on a bound is in that bound's bucket (le: less than or equal).
  EXPECT_EQ(registry.render(),
            "# HELP d_seconds Durations.\n# TYPE d_seconds histogram\n"
            "d_seconds_bucket{outcome=\"shed\",le=\"0.125\"} 2\n"
            "d_seconds_bucket{outcome=\"shed\",le=\"0.5\"} 3\n"
            "d_seconds_bucket{outcome=\"shed\",le=\"+Inf\"} 4\n"
            "d_seconds_sum{outcome=\"shed\"} 2.4375\n"
            "d_seconds_count{outcome=\"shed\"} 4\n"
            "d_seconds_bucket{outcome=\"success\",le=\"0.125\"} 0\n"
            "d_seconds_bucket{outcome=\"success\",le=\"0.5\"} 1\n"
            "d_seconds_bucket{outcome=\"success\",le=\"+Inf\"} 1\n"
            "d_seconds_sum{outcome=\"success\"} 0.375\n"
            "d_seconds_count{outcome=\"success\"} 1\n");
  const auto buckets = registry.buckets("d_seconds", shed);
  ASSERT_EQ(buckets.size(), 3U);
  EXPECT_EQ(buckets[1], std::make_pair(0.5, std::uint64_t{3}));
  EXPECT_TRUE(std::isinf(buckets[2].first));
  EXPECT_TRUE(registry.buckets("d_seconds", {{"outcome", "failed"}}).empty());
}

TEST(Exposition, RefusesHistogramsWithBadBoundsAndMixedUse) {
  MetricsRegistry registry;
  EXPECT_THROW(registry.declare_histogram("h", "", {}), Error);
  EXPECT_THROW(registry.declare_histogram("h", "", {0.5, 0.1}), Error);
  EXPECT_THROW(registry.declare_histogram("h", "", {0.1, 0.1}), Error);
  EXPECT_THROW(registry.declare_histogram("h", "", {0.1, std::numeric_limits<double>::infinity()}), Error);
  EXPECT_THROW(registry.declare("h", MetricType::histogram, ""), Error);
  registry.declare_histogram("h", "", {1.0});
  registry.declare("g", MetricType::gauge, "");
  EXPECT_THROW(registry.set("h", {}, 1.0), Error);
  EXPECT_THROW(registry.add("h", {}, 1.0), Error);
  EXPECT_THROW(registry.observe("g", {}, 1.0), Error);
  EXPECT_THROW(registry.declare("h", MetricType::gauge, ""), Error);
}

TEST(WorkMetrics, AWindowSetsTheGaugesAndCountsTheCounters) {
  MetricsRegistry registry;
  const Labels labels = {{"algorithm", "batchdvfs"}, {"model", "resnet50"}, {"simulated", "true"}};
  WorkMetrics work(registry, labels);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_info", labels), 1.0);
  EXPECT_NE(registry.render().find("gpucap_windows_total{algorithm=\"batchdvfs\",model=\"resnet50\",simulated=\"true\"} 0"),
            std::string::npos);
  WindowFigures f;
  f.cap_w = 150.0;
  f.max_power_w = 155.0;
  f.mean_power_w = 140.0;
  f.batch_size = 32;
  f.sm_clock_mhz = 1303.0;
  f.memory_clock_mhz = 3615.0;
  f.throughput_img_s = 420.0;
  f.images = 420;
  f.over_cap = true;
  f.tenants = {{"0", 50.0, 16}, {"1", 50.0, 8}};
  work.window(f);
  f.over_cap = false;
  work.window(f);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_power_cap_watts", labels), 150.0);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_sm_clock_hertz", labels), 1303e6);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_windows_total", labels), 2.0);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_windows_over_cap_total", labels), 1.0);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_images_total", labels), 840.0);
  auto tenant = labels;
  tenant.emplace_back("tenant", "1");
  EXPECT_DOUBLE_EQ(registry.value("gpucap_tenant_mps_share_ratio", tenant), 0.5);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_tenant_batch_size", tenant), 8.0);
}

TEST(WorkMetrics, TenantsWithoutSharesHaveNoShareSeries) {
  MetricsRegistry registry;
  WorkMetrics work(registry, {});
  WindowFigures f;
  f.tenants = {{"fg", std::numeric_limits<double>::quiet_NaN(), 1}};
  work.window(f);
  EXPECT_EQ(registry.render().find("gpucap_tenant_mps_share_ratio{"), std::string::npos);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_tenant_batch_size", {{"tenant", "fg"}}), 1.0);
}

// A share without a cap, whose jobs each have their own batch size: no cap series and no single
// batch size, rather than 0s an alert would read; a job that stops running loses its batch series.
TEST(WorkMetrics, UnknownFiguresAreLeftOutNotExportedAsZero) {
  MetricsRegistry registry;
  WorkMetrics work(registry, {});
  WindowFigures f;
  f.cap_w = 0.0;
  f.batch_size = 0;
  f.tenants = {{"fg", std::numeric_limits<double>::quiet_NaN(), 4}};
  work.window(f);
  const auto text = registry.render();
  EXPECT_EQ(text.find("\ngpucap_power_cap_watts "), std::string::npos) << text;
  EXPECT_EQ(text.find("\ngpucap_batch_size "), std::string::npos) << text;
  EXPECT_NE(text.find("gpucap_tenant_batch_size{tenant=\"fg\"} 4"), std::string::npos) << text;
  f.tenants = {{"fg", std::numeric_limits<double>::quiet_NaN(), 0}};
  work.window(f);
  EXPECT_EQ(registry.render().find("gpucap_tenant_batch_size{"), std::string::npos);
  work.cap(180.0);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_power_cap_watts", {}), 180.0);
}

TEST(WorkMetrics, BsoEventsAreCountedByBatchSizeWithoutWindowFamilies) {
  MetricsRegistry registry;
  WorkMetrics work(registry, {{"algorithm", "bso"}}, /*windows=*/false);
  work.trial(TrialEvent::dispatched, 32);
  work.trial(TrialEvent::dispatched, 32);
  work.trial(TrialEvent::reported_failed, 64);
  EXPECT_DOUBLE_EQ(
      registry.value("gpucap_bso_events_total", {{"algorithm", "bso"}, {"event", "dispatched"}, {"batch_size", "32"}}), 2.0);
  EXPECT_DOUBLE_EQ(registry.value("gpucap_bso_events_total",
                                  {{"algorithm", "bso"}, {"event", "reported_failed"}, {"batch_size", "64"}}),
                   1.0);
  EXPECT_EQ(registry.render().find("gpucap_windows_total"), std::string::npos);
}

}  // namespace
}  // namespace gpucap::monitor
