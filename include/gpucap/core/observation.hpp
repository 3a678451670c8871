#pragma once
// What a controller sees at the end of a window: everything it may base a decision on.

#include <vector>

#include "gpucap/core/knobs.hpp"
#include "gpucap/core/window_stats.hpp"

namespace gpucap {

struct Observation {
  double time_s = 0.0;             // end of the window (platform time: virtual or steady)
  double cap_w = 0.0;              // power cap in force at time_s
  WindowStats power;               // power samples of the window
  // The samples taken once the power reading reflected the window's knobs: after a change of
  // knobs, the board sensor keeps showing the old ones for its averaging time. Empty if the
  // window was shorter than that.
  WindowStats settled_power;
  double throughput_img_s = 0.0;   // images finished in the window / window duration
  // The same per MPS tenant, in the order of knobs.tenants (one entry in single-tenant runs).
  std::vector<double> tenant_throughput_img_s;
  double mean_batch_latency_s = 0.0;
  int batches = 0;                 // batches finished in the window
  Knobs knobs;                     // knobs that were applied during the window
};

}  // namespace gpucap
