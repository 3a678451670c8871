#include "gpucap/cluster/curve.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "support/expect_error.hpp"

namespace gpucap::cluster {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

NodeCurve good_curve() {
  NodeCurve c;
  c.min_cap_w = 100.0;
  c.max_cap_w = 300.0;
  c.tdp_w = 250.0;
  c.priority = 1.0;
  c.points = {{100.0, 10.0, 1.0}, {200.0, 16.0, 1.0}, {300.0, 18.0, 1.0}};
  return c;
}

struct Broken {
  const char* name;
  std::function<void(NodeCurve&)> breaks;
  const char* message;
};

TEST(Curve, AGoodCurveHasNoProblem) { EXPECT_EQ(curve_problem(good_curve()), std::nullopt); }

TEST(Curve, EveryBrokenCurveIsRejectedWithItsReason) {
  const std::vector<Broken> cases = {
      {"nan min", [](NodeCurve& c) { c.min_cap_w = kNaN; }, "is not finite"},
      {"infinite max", [](NodeCurve& c) { c.max_cap_w = std::numeric_limits<double>::infinity(); }, "is not finite"},
      {"zero min", [](NodeCurve& c) { c.min_cap_w = 0.0; }, "min cap 0 W must be positive"},
      {"min above max", [](NodeCurve& c) { c.min_cap_w = 350.0; }, "min cap 350 W is above max cap 300 W"},
      {"absurd max",
       [](NodeCurve& c) {
         c.max_cap_w = 2e5;
         c.points.back().cap_w = 2e5;
       },
       "is absurd"},
      {"zero priority", [](NodeCurve& c) { c.priority = 0.0; }, "priority 0 must be a positive number"},
      {"nan priority", [](NodeCurve& c) { c.priority = kNaN; }, "must be a positive number"},
      {"negative tdp", [](NodeCurve& c) { c.tdp_w = -1.0; }, "TDP -1 W must be a positive number"},
      {"no points", [](NodeCurve& c) { c.points.clear(); }, "the curve has no points"},
      {"nan throughput", [](NodeCurve& c) { c.points[1].throughput = kNaN; }, "point 1 (200 W, throughput nan"},
      {"negative cap", [](NodeCurve& c) { c.points[0].cap_w = -5.0; }, "point 0 has an absurd cap -5 W"},
      {"negative throughput", [](NodeCurve& c) { c.points[2].throughput = -1.0; }, "negative throughput -1"},
      {"attainment above 1", [](NodeCurve& c) { c.points[1].slo_attainment = 1.5; }, "SLO attainment 1.5 outside [0, 1]"},
      {"repeated cap", [](NodeCurve& c) { c.points[2].cap_w = 200.0; },
       "caps must increase: point 2 (200 W) after point 1 (200 W)"},
      {"decreasing cap", [](NodeCurve& c) { c.points[1].cap_w = 90.0; }, "caps must increase"},
      {"range not covered below", [](NodeCurve& c) { c.points[0].cap_w = 150.0; },
       "the points cover 150-300 W, not the whole cap range 100-300 W"},
      {"range not covered above", [](NodeCurve& c) { c.max_cap_w = 320.0; }, "not the whole cap range 100-320 W"},
  };
  for (const auto& broken : cases) {
    auto curve = good_curve();
    broken.breaks(curve);
    const auto problem = curve_problem(curve);
    ASSERT_TRUE(problem.has_value()) << broken.name;
    EXPECT_NE(problem->find(broken.message), std::string::npos) << broken.name << ": " << *problem;
    test::expect_error_from([&] { validate(curve); }, ErrorCode::invalid_data, "invalid power curve: ");
    test::expect_error_from([&] { (void)PreparedCurve(curve); }, ErrorCode::invalid_data, broken.message);
  }
}

TEST(Curve, InterpolationIsLinearAndClamped) {
  const std::vector<ValuePoint> points = {{100.0, 10.0}, {200.0, 20.0}, {300.0, 20.0}};
  EXPECT_DOUBLE_EQ(interpolate(points, 50.0), 10.0);
  EXPECT_DOUBLE_EQ(interpolate(points, 150.0), 15.0);
  EXPECT_DOUBLE_EQ(interpolate(points, 250.0), 20.0);
  EXPECT_DOUBLE_EQ(interpolate(points, 999.0), 20.0);
  EXPECT_DOUBLE_EQ(interpolate({}, 100.0), 0.0);
}

TEST(Curve, TheHullOfAConcaveCurveIsTheCurveWithoutCollinearPoints) {
  const std::vector<ValuePoint> points = {{0.0, 0.0}, {1.0, 2.0}, {2.0, 4.0}, {3.0, 5.0}, {4.0, 5.5}};
  const auto hull = upper_concave_hull(points);
  ASSERT_EQ(hull.size(), 4U);  // (1, 2) lies on the chord from (0, 0) to (2, 4)
  EXPECT_DOUBLE_EQ(hull[1].cap_w, 2.0);
  EXPECT_DOUBLE_EQ(hull.back().cap_w, 4.0);
}

TEST(Curve, TheHullBridgesADipAndKeepsTheEnds) {
  // An S-shaped curve: flat, then a steep rise, then flat.
  const std::vector<ValuePoint> points = {{100.0, 1.0}, {150.0, 1.5}, {200.0, 9.0}, {250.0, 10.0}, {300.0, 10.0}};
  const auto hull = upper_concave_hull(points);
  ASSERT_EQ(hull.size(), 4U);
  EXPECT_DOUBLE_EQ(hull[0].cap_w, 100.0);
  EXPECT_DOUBLE_EQ(hull[1].cap_w, 200.0);  // (150, 1.5) lies under the chord from 100 to 200
  EXPECT_DOUBLE_EQ(hull[2].cap_w, 250.0);
  EXPECT_DOUBLE_EQ(hull[3].cap_w, 300.0);
  // Every vertex is a point of the curve, and the hull is never below it.
  for (const auto& p : points) EXPECT_GE(interpolate(hull, p.cap_w) + 1e-12, p.value);
}

TEST(Curve, APreparedCurveClipsToItsRangeAndWeighsByPriorityAndAttainment) {
  auto c = good_curve();
  c.min_cap_w = 150.0;
  c.max_cap_w = 250.0;
  c.priority = 2.0;
  c.points[1].slo_attainment = 0.5;
  const PreparedCurve p(c);
  ASSERT_EQ(p.points().size(), 3U);
  EXPECT_DOUBLE_EQ(p.points().front().cap_w, 150.0);
  EXPECT_DOUBLE_EQ(p.points().front().value, 2.0 * 0.5 * (10.0 + 8.0));  // halfway from 20 to 16
  EXPECT_DOUBLE_EQ(p.points()[1].value, 2.0 * 16.0 * 0.5);
  EXPECT_DOUBLE_EQ(p.points().back().cap_w, 250.0);
  EXPECT_DOUBLE_EQ(p.value(0.0), 0.0);  // standby
  EXPECT_DOUBLE_EQ(p.value(100.0), p.points().front().value);  // clamped into the range
}

TEST(Curve, AConcaveCurveHasNoHullGapAndAnSShapedOneHasItsDip) {
  const PreparedCurve concave(good_curve());
  EXPECT_TRUE(concave.concave());
  EXPECT_DOUBLE_EQ(concave.max_hull_gap(), 0.0);

  auto s = good_curve();
  s.points = {{100.0, 1.0}, {200.0, 2.0}, {300.0, 13.0}};
  const PreparedCurve dip(s);
  EXPECT_FALSE(dip.concave());
  // The hull runs straight from (100, 1) to (300, 13): at 200 W it is 7, the curve 2.
  EXPECT_NEAR(dip.max_hull_gap(), 5.0, 1e-12);
  EXPECT_NEAR(dip.hull_value(200.0), 7.0, 1e-12);
  EXPECT_NEAR(dip.value(200.0), 2.0, 1e-12);
}

TEST(Curve, TheLeastCapReachingAValueIsItsFirstCrossing) {
  const PreparedCurve p(good_curve());
  EXPECT_DOUBLE_EQ(p.least_cap_reaching(5.0), 100.0);    // already at the minimum
  EXPECT_DOUBLE_EQ(p.least_cap_reaching(13.0), 150.0);   // halfway along 10 → 16
  EXPECT_DOUBLE_EQ(p.least_cap_reaching(18.0), 300.0);
  EXPECT_DOUBLE_EQ(p.least_cap_reaching(99.0), 300.0);   // never: the maximum
}

}  // namespace
}  // namespace gpucap::cluster
