// The predictors' files: a model `gpucap fit` wrote (--fitted F.json, predict/fitted), a boosted
// tree ensemble in the "pctodl-gbr/1" format, and a PctoDL closed-form parameter file
// (--params DIR: DIR/params/<model>/<set>.json, predict/pctodl). A file that loads is asked for a
// prediction, as `gpucap predict` would. Input: one byte picks the file, the rest is its content.

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "gpucap/predict/fitted.hpp"
#include "gpucap/predict/gbr.hpp"
#include "gpucap/predict/pctodl.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace predict = gpucap::predict;

namespace {

void write(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

// A one-split ensemble over `features` features, valid for load_gradient_boosted_trees.
std::string small_ensemble(int features) {
  return fmt::format(R"({{"format":"pctodl-gbr/1","loss":"squared_error","init":{{"value":0.5}},"learning_rate":0.1,)"
                     R"("n_features":{},"trees":[{{"children_left":[1,-1,-1],"children_right":[2,-1,-1],)"
                     R"("feature":[0,-2,-2],"threshold":[0.5,-2,-2],"value":[0,0.1,0.2]}}]}})",
                     features);
}

// DIR/index.json, DIR/gbr/m/s/*.json (small valid ensembles); DIR/params/m/s.json is the input.
struct PctodlDir {
  gpucap::fuzz::ScratchFile scratch{"unused"};
  std::filesystem::path params = scratch.dir() / "params" / "m" / "s.json";
  PctodlDir() {
    write(scratch.dir() / "index.json", R"({"models": ["m"]})");
    const auto gbr = scratch.dir() / "gbr" / "m" / "s";
    write(gbr / "sm_gbr.json", small_ensemble(13));
    write(gbr / "mem_gbr.json", small_ensemble(11));
    write(gbr / "throughput_gbr.json", small_ensemble(14));
    write(gbr / "power_dyn_gbr.json", small_ensemble(8));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gpucap::fuzz::ScratchFile file("model.json");
  static PctodlDir pctodl;
  gpucap::fuzz::Input input(data, size);
  const unsigned which = input.choice(3);
  const auto content = input.rest();
  if (which == 0) {
    refusals_only([&] {
      const auto predictor = predict::FittedPredictor::from_json(std::string(content), "fitted.json");
      const auto text = predictor.to_json();
      bool reread = false;
      refusals_only([&] {
        check(predict::FittedPredictor::from_json(text, "again.json").to_json() == text, "a saved predictor reads back differently");
        reread = true;
      });
      check(reread, "a predictor's own JSON does not read back");
      for (const double memory_clock : predictor.memory_clocks_mhz()) {
        const double shares[] = {50.0, 25.0};
        const int batches[] = {8, 16};
        refusals_only([&] {
          const auto p = predictor.predict(shares, batches, 1500.0, memory_clock);
          check(p.u_sm_pct >= 0.0 && p.u_sm_pct <= 100.0, "an SM utilisation outside [0, 100]");
        });
      }
    });
  } else if (which == 1) {
    refusals_only([&] {
      const auto trees = predict::load_gradient_boosted_trees(file.write(content));
      // The trees are the file's (no node index or feature silently wrapped or cut).
      const auto json = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
      check(json.is_object() && json.at("trees").size() == trees.trees.size(), "another number of trees than the file's");
      for (std::size_t t = 0; t < trees.trees.size(); ++t) {
        const auto& tree = json.at("trees").at(t);
        check(tree.at("children_left") == nlohmann::json(trees.trees[t].left) &&
                  tree.at("children_right") == nlohmann::json(trees.trees[t].right) &&
                  tree.at("feature") == nlohmann::json(trees.trees[t].feature),
              "a tree was read with other nodes than the file's");
      }
      if (trees.n_features <= 4096) {
        for (const double v : {-1e30, 0.0, 0.5, 1e30}) {
          const std::vector<double> x(trees.n_features, v);
          (void)trees.predict(x);
        }
      }
    });
  } else {
    write(pctodl.params, content);
    refusals_only([&] {
      const auto predictor = predict::PctodlPredictor::load(pctodl.scratch.dir().string(), "m", "s");
      const double p[] = {60.0, 40.0};
      const int b[] = {8, 32};
      refusals_only([&] { (void)predictor.predict(p, b, 1500.0); });
    });
  }
  return 0;
}
