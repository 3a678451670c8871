#pragma once
// PctoDL's profiling matrix on a real GPU (seed-systems.md §2.3): each configuration runs as one
// round of the MPS worker pool (runtime/mps.hpp: a private MPS daemon, one worker process per
// tenant), while a thread samples the GPU's power, SM clock and utilisation during the round's
// measurement. With a control session the SM clock (and, if asked, the memory clock) is locked to
// the configuration's first — through the journaled session, so a crash still restores them;
// without one the clocks stay with the GPU and the row records the clock it ran at.

#include <memory>

#include "gpucap/device/control_session.hpp"
#include "gpucap/device/device.hpp"
#include "gpucap/runtime/mps.hpp"
#include "gpucap/runtime/mps_profile.hpp"

namespace gpucap::runtime {

struct GpuProfileOptions {
  MpsRunRequest round{2.0, 7.0};  // warm-up, then the measured part (upstream's profiler: 7 s)
  double sample_hz = 20.0;        // upstream samples power every 50 ms
  bool lock_memory_clock = false; // with a session: lock the configuration's memory clock too
};

class GpuProfiler {
 public:
  // `clocks`: the session to lock clocks through, or nullptr (the clocks stay with the GPU). The
  // pool (and its daemon) starts with the first configuration. Error(usage) for a sampling rate
  // outside 1..1000 Hz or a measurement under 0.1 s.
  GpuProfiler(device::Device& gpu, device::ControlSession* clocks, MpsPoolOptions pool, GpuProfileOptions options);
  ~GpuProfiler();
  GpuProfiler(const GpuProfiler&) = delete;
  GpuProfiler& operator=(const GpuProfiler&) = delete;

  // Runs one configuration and measures it. A worker that halves its batch on an out-of-memory
  // error is reported with the batch it ran. Errors of the pool (a worker that dies, hangs or
  // answers garbage) propagate after it stopped everything it started.
  [[nodiscard]] ProfileRow measure(const ProfileConfig& config);
  // Stops the workers and the daemon (idempotent; the destructor does it too).
  void stop();

 private:
  device::Device& gpu_;
  device::ControlSession* clocks_;
  MpsPoolOptions pool_options_;
  GpuProfileOptions options_;
  std::unique_ptr<MpsWorkerPool> pool_;
};

}  // namespace gpucap::runtime
