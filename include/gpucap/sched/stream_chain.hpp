#pragma once
// How long one job's kernels take on a stream of their own, fed by one host thread: the figure
// the share twin sizes a step's kernels and its per-op dispatch by, so that a job alone takes
// its calibrated time under the simulator's free sharing (docs/simulator.md, "Free sharing").

#include <vector>

namespace gpucap::sched {

// The device stage alone, as sched's simulator runs it: the host launches a kernel every
// launch_s (the first one launch_s after the stage starts); a kernel starts once launched and
// once the one before it has ended; after every sync_every kernels (0: never) the host waits for
// the GPU to finish before its next launch; with a launch window w (0: none) a launch also waits
// for the kernel w before it to end. Seconds until the last kernel ends.
[[nodiscard]] double stream_chain_s(const std::vector<double>& kernels_s, double launch_s, int sync_every, int window = 0);

// `shape` scaled so that its chain at `launch_s` takes `target_s` (a GPU-paced stage). All zero
// when the launches alone take that long.
[[nodiscard]] std::vector<double> kernels_for_chain(const std::vector<double>& shape, double launch_s, double target_s);

// The launch interval at which `kernels_s` take `target_s` (a host-paced stage): 0 when the
// kernels alone take that long.
[[nodiscard]] double launch_for_chain(const std::vector<double>& kernels_s, int sync_every, double target_s);

}  // namespace gpucap::sched
