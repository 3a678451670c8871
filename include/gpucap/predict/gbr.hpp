#pragma once
// Gradient-boosted regression trees as scikit-learn's GradientBoostingRegressor evaluates them
// (squared-error loss, identity link): y = init + Σ learning_rate · leaf(tree, x), where each
// feature is rounded to float32 before it is compared (`<=` goes left) with the double threshold.

#include <span>
#include <string>
#include <vector>

namespace gpucap::predict {

struct RegressionTree {
  std::vector<int> left;       // child for x[feature] <= threshold; -1 at a leaf
  std::vector<int> right;      // -1 at a leaf
  std::vector<int> feature;
  std::vector<double> threshold;
  std::vector<double> value;   // mean target of each node; only leaves are used

  [[nodiscard]] double leaf_value(std::span<const float> x) const;
};

struct GradientBoostedTrees {
  double init = 0.0;
  double learning_rate = 0.1;
  std::size_t n_features = 0;
  std::vector<std::string> feature_names;
  std::vector<RegressionTree> trees;

  // Throws Error(internal) if x does not have n_features values.
  [[nodiscard]] double predict(std::span<const double> x) const;
};

// Reads one ensemble in the "pctodl-gbr/1" JSON format; Error(invalid_data) naming the file on
// any inconsistency (child index out of range, a cycle-prone node order, wrong array lengths).
[[nodiscard]] GradientBoostedTrees load_gradient_boosted_trees(const std::string& path);

}  // namespace gpucap::predict
