#include "gpucap/predict/gbr.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::predict {
namespace {

// Two stumps on feature 0 (threshold 1.5) and feature 1 (threshold 0.1).
const char* kEnsemble = R"({"format": "pctodl-gbr/1", "loss": "squared_error", "init": {"value": 10.0},
  "learning_rate": 0.1, "n_features": 2,
  "trees": [
    {"children_left": [1, -1, -1], "children_right": [2, -1, -1], "feature": [0, -2, -2],
     "threshold": [1.5, -2.0, -2.0], "value": [0.0, -5.0, 5.0]},
    {"children_left": [1, -1, -1], "children_right": [2, -1, -1], "feature": [1, -2, -2],
     "threshold": [0.1, -2.0, -2.0], "value": [0.0, -1.0, 1.0]}]})";

TEST(GradientBoostedTrees, SumsScaledLeavesOverTrees) {
  test::TempDir dir;
  const auto model = load_gradient_boosted_trees(dir.write("m.json", kEnsemble));
  const double below[] = {1.0, 0.0};
  const double above[] = {2.0, 1.0};
  EXPECT_DOUBLE_EQ(model.predict(below), 10.0 - 0.5 - 0.1);
  EXPECT_DOUBLE_EQ(model.predict(above), 10.0 + 0.5 + 0.1);
}

TEST(GradientBoostedTrees, TiesGoLeftAfterRoundingToFloat) {
  test::TempDir dir;
  const auto model = load_gradient_boosted_trees(dir.write("m.json", kEnsemble));
  const double tie[] = {1.5, 0.0};
  EXPECT_DOUBLE_EQ(model.predict(tie), 10.0 - 0.5 - 0.1) << "x == threshold goes left";
  // 0.1 as a float is 0.100000001490116…, above the double threshold 0.1: goes right.
  const double rounded_up[] = {1.0, 0.1};
  EXPECT_DOUBLE_EQ(model.predict(rounded_up), 10.0 - 0.5 + 0.1);
}

TEST(GradientBoostedTrees, RejectsBrokenEnsembles) {
  test::TempDir dir;
  auto broken = std::string(kEnsemble);
  broken.replace(broken.find("[1, -1, -1]"), 11, "[0, -1, -1]");  // a node pointing at itself
  EXPECT_THROW((void)load_gradient_boosted_trees(dir.write("cycle.json", broken)), Error);
  auto bad_feature = std::string(kEnsemble);
  bad_feature.replace(bad_feature.find("\"feature\": [1,"), 14, "\"feature\": [7,");
  EXPECT_THROW((void)load_gradient_boosted_trees(dir.write("feature.json", bad_feature)), Error);
  const auto model = load_gradient_boosted_trees(dir.write("ok.json", kEnsemble));
  const double too_few[] = {1.0};
  EXPECT_THROW((void)model.predict(too_few), Error);
}

}  // namespace
}  // namespace gpucap::predict
