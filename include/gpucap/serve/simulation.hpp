#pragma once
// Serving in virtual time: a stream of arrivals (serve/arrivals.hpp) through the serving core and
// loop on the twin, as fast as the host computes and exactly reproducible — what `gpucap bench
// --matrix serve` and the oracle's search run. The HTTP server runs the same core and loop against
// the wall clock; only where the requests come from and how time passes differ.
//
// The run: requests arrive by the process until `duration_s`; each is admitted (or shed, or
// refused) at its arrival; the batcher launches batches on the twin's engine; every window the
// controller decides. After the last arrival the queue drains (at most `drain_s`); a request
// still queued then counts as failed. Figures are per segment of the cap schedule: a request
// belongs to the segment it arrived in, a window to the segment it ended in.

#include <cstdint>
#include <functional>
#include <vector>

#include "gpucap/control/serving.hpp"
#include "gpucap/core/cap_schedule.hpp"
#include "gpucap/runtime/platform.hpp"
#include "gpucap/serve/arrivals.hpp"
#include "gpucap/serve/serving_loop.hpp"

namespace gpucap::serve {

struct SimulationConfig {
  double duration_s = 60.0;      // arrivals stop here
  double drain_s = 10.0;         // then the queue may drain this long
  CapSchedule cap = CapSchedule::constant(1.0);
  double slo_s = 0.1;
  int items_per_request = 1;
  BatcherConfig batcher;         // the model's bound, preferred sizes, priority levels, queue policy
  LatencyStatsConfig stats;      // its slo_s is set from slo_s
};

struct SegmentReport {
  double start_s = 0.0;
  double end_s = 0.0;
  double cap_w = 0.0;
  std::uint64_t arrivals = 0;
  std::uint64_t answered = 0;
  std::uint64_t good = 0;       // answered within the SLO
  std::uint64_t shed = 0;       // 429 at admission
  std::uint64_t refused = 0;    // refused by the queue (full)
  std::uint64_t failed = 0;     // timed out, engine error, or still queued at the end
  double goodput_rps = 0.0;     // good / segment length
  double throughput_rps = 0.0;  // answered / segment length
  double slo_attainment = 1.0;  // good / (answered + failed); 1 without any
  double p99_s = 0.0;           // of the answered requests (exact)
  double mean_power_w = 0.0;    // over the windows that ended in the segment
  double max_power_w = 0.0;
  int windows = 0;
  int windows_over_cap = 0;
  int windows_over_cap_outside_transitions = 0;
  std::size_t max_queued_requests = 0;
};

struct SimulationReport {
  std::vector<SegmentReport> segments;
  SegmentReport total;          // the whole run, as one segment
  ServingTotals loop;           // energy, time over cap, windows
  std::vector<ServingWindow> windows;
};

// Runs `arrivals` through `controller` on `platform` (a twin: virtual time). The controller's
// first knobs apply at the start; `on_window` is told of each window as it closes.
[[nodiscard]] SimulationReport simulate_serving(runtime::Platform& platform, control::ServingController& controller,
                                                ArrivalProcess arrivals, const SimulationConfig& config,
                                                const std::function<void(const ServingWindow&)>& on_window = {});

}  // namespace gpucap::serve
