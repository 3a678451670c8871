#pragma once
// The data sources' path flags that `gpucap calibrate` and `gpucap fidelity` share (--p40-logs,
// --pctodl-params, --published, --zeus-traces): each replaces one source's default path.

#include <string>
#include <vector>

#include "gpucap/calibrate/calibration.hpp"

namespace gpucap::cli {

struct SourcePathFlags {
  std::string p40_logs;
  std::string pctodl_params;
  std::string published;
  std::string zeus_traces;

  [[nodiscard]] bool any() const;
  // A path given for a source that `sources` leaves out would go unused: Error(usage) naming it.
  void reject_unselected(const std::vector<calibrate::Source>& sources) const;
  // The paths given replace the defaults in `paths`.
  void apply(calibrate::SourcePaths& paths) const;
};

}  // namespace gpucap::cli
