// Profiles: `gpucap tune --json`'s trials that capfit (--profile) and a cluster node read
// (predict/profile_model: load_profile_json, then ProfileModel, and the node's capacity curve
// from it, cluster/node_curves), and the profile CSVs `gpucap fit` reads (PctoDL's columns,
// predict/fitted_csv). Input: one byte picks the format, the rest is the file.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "fuzz_support.hpp"
#include "gpucap/cluster/curve.hpp"
#include "gpucap/cluster/node_curves.hpp"
#include "gpucap/predict/fitted.hpp"
#include "gpucap/predict/profile_model.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace predict = gpucap::predict;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gpucap::fuzz::ScratchFile json_file("profile.json");
  static gpucap::fuzz::ScratchFile csv_file("profile.csv");
  gpucap::fuzz::Input input(data, size);
  const unsigned which = input.choice(2);
  const auto content = input.rest();
  if (which == 1) {
    refusals_only([&] {
      const auto rows = predict::read_profile_csv(csv_file.write(content));
      check(!rows.empty(), "a profile CSV without rows");
      for (const auto& row : rows) check(row.shares_pct.size() == row.batches.size(), "shares and batches of unequal length");
    });
    return 0;
  }
  refusals_only([&] {
    const auto samples = predict::load_profile_json(json_file.write(content));
    const predict::ProfileModel model(samples);
    for (const auto& column : model.columns()) {
      check(!column.batch_sizes.empty(), "a profile column without batch sizes");
      // Every batch size of the column's range (a sample of them for a wide range).
      const int lo = column.min_batch();
      const int hi = column.max_batch();
      const int stride = std::max(1, (hi - lo) / 64);
      for (int b = lo; b <= hi; b += stride) {
        const auto p = model.predict(column, b);
        check(p.has_value(), "no prediction inside the column's range");
        check(std::isfinite(p->throughput_img_s) && std::isfinite(p->max_power_w), "a prediction that is not finite");
        if (hi - b < stride) break;
      }
    }
    refusals_only([&] {
      const auto curve = gpucap::cluster::profile_capacity_curve(model, 0.1, 100.0, 300.0, 300.0);
      check(!gpucap::cluster::curve_problem(curve).has_value(), "a capacity curve from a profile that is not a valid curve");
    });
  });
  return 0;
}
