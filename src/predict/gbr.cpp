#include "gpucap/predict/gbr.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "gpucap/core/error.hpp"
#include "gpucap/core/json_file.hpp"

namespace gpucap::predict {

double RegressionTree::leaf_value(std::span<const float> x) const {
  std::size_t node = 0;
  while (left[node] >= 0) {
    const auto f = static_cast<std::size_t>(feature[node]);
    node = static_cast<double>(x[f]) <= threshold[node] ? static_cast<std::size_t>(left[node])
                                                        : static_cast<std::size_t>(right[node]);
  }
  return value[node];
}

double GradientBoostedTrees::predict(std::span<const double> x) const {
  if (x.size() != n_features) {
    throw Error(ErrorCode::internal, fmt::format("tree ensemble expects {} features, got {}", n_features, x.size()));
  }
  std::vector<float> rounded(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) rounded[i] = static_cast<float>(x[i]);
  double y = init;
  for (const auto& tree : trees) {
    const double step = learning_rate * tree.leaf_value(rounded);  // rounded to double, then summed in order
    y = y + step;
  }
  return y;
}

namespace {

template <typename T>
std::vector<T> array_of(const JsonFields& fields, std::string_view key) {
  const auto& value = fields.at(key);
  if (!value.is_array()) throw fields.error(key, "must be an array");
  std::vector<T> out;
  out.reserve(value.size());
  for (const auto& item : value) {
    if constexpr (std::is_integral_v<T>) {
      // Node indices and features: whole numbers in T's range (get<int>() of 1e30 would be
      // undefined behaviour, of 2^32 + 1 would wrap to another node).
      const bool fits = item.is_number_integer() &&
                        (item.is_number_unsigned() ? item.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                                                   : item.get<std::int64_t>() >= std::numeric_limits<T>::min() &&
                                                         item.get<std::int64_t>() <= std::numeric_limits<T>::max());
      if (!fits) throw fields.error(key, "must contain only whole numbers");
    } else {
      if (!item.is_number()) throw fields.error(key, "must contain only numbers");
    }
    out.push_back(item.get<T>());
  }
  return out;
}

RegressionTree parse_tree(const JsonFields& fields, std::size_t n_features) {
  RegressionTree tree;
  tree.left = array_of<int>(fields, "children_left");
  tree.right = array_of<int>(fields, "children_right");
  tree.feature = array_of<int>(fields, "feature");
  tree.threshold = array_of<double>(fields, "threshold");
  tree.value = array_of<double>(fields, "value");
  const auto nodes = tree.left.size();
  if (nodes == 0 || tree.right.size() != nodes || tree.feature.size() != nodes || tree.threshold.size() != nodes ||
      tree.value.size() != nodes) {
    throw fields.error("children_left", "node arrays must be non-empty and of equal length");
  }
  for (std::size_t n = 0; n < nodes; ++n) {
    const bool leaf = tree.left[n] < 0;
    if (leaf != (tree.right[n] < 0)) throw fields.error("children_right", fmt::format("node {} has one child", n));
    if (leaf) continue;
    // Children always come after their parent in scikit-learn's layout; checking it rules out
    // cycles, so evaluation always ends at a leaf.
    const auto l = static_cast<std::size_t>(tree.left[n]);
    const auto r = static_cast<std::size_t>(tree.right[n]);
    if (l <= n || r <= n || l >= nodes || r >= nodes) {
      throw fields.error("children_left", fmt::format("node {} has a child index out of order or range", n));
    }
    if (tree.feature[n] < 0 || static_cast<std::size_t>(tree.feature[n]) >= n_features) {
      throw fields.error("feature", fmt::format("node {} splits on feature {} of {}", n, tree.feature[n], n_features));
    }
  }
  return tree;
}

}  // namespace

GradientBoostedTrees load_gradient_boosted_trees(const std::string& path) {
  const auto json = load_json_file(path);
  const JsonFields f(json, path);
  if (f.string("format") != "pctodl-gbr/1") throw f.error("format", "expected \"pctodl-gbr/1\"");
  if (f.string("loss") != "squared_error") throw f.error("loss", "only squared_error ensembles are supported");
  GradientBoostedTrees model;
  model.init = f.object("init").number("value");
  model.learning_rate = f.positive("learning_rate");
  model.n_features = static_cast<std::size_t>(f.positive_integer("n_features"));
  model.feature_names = f.strings_or_empty("feature_names");
  const auto& trees = f.at("trees");
  if (!trees.is_array() || trees.empty()) throw f.error("trees", "must be a non-empty array");
  for (std::size_t i = 0; i < trees.size(); ++i) {
    model.trees.push_back(parse_tree(JsonFields(trees[i], path, fmt::format("trees[{}].", i)), model.n_features));
  }
  return model;
}

}  // namespace gpucap::predict
