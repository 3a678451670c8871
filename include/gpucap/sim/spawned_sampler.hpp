#pragma once
// The BatchDVFS harness's power sampler: a Python thread that, over and over, spawns one
// `nvidia-smi --query-gpu=power.draw` process whose answer goes to the controller's list, spawns a
// second one for the full log, and sleeps 0.1 s (shared/reference/seed-systems.md §1.2).
//
// On the P40 host each process stalled the step running when it started: at batch 1-4 the logged
// steps of one (batch size, clock) split into two modes about 60 ms apart, the slow ones some 5.5
// per second of stepping, and steps of 0.1-0.2 s into three modes, 0, 1 and 2 stalls long
// (docs/simulator.md, "The BatchDVFS harness's sampler"). A step stalls once for each process that
// starts in it, CPU decode or GPU work alike.
//
// The schedule is periodic from time 0: cycle j starts its first process at j·period and its
// second at j·period + process_s; the controller's reading is taken when the first one exits.

namespace gpucap::sim {

struct SpawnedSampler {
  double process_s = 0.0;  // one nvidia-smi process, from spawn to exit
  double stall_s = 0.0;    // what each process's start costs the work running then
  double sleep_s = 0.1;    // the thread's sleep after the two processes

  [[nodiscard]] double period_s() const { return 2.0 * process_s + sleep_s; }
  // Process starts per second, each one a stall of whatever runs then.
  [[nodiscard]] double stall_rate_hz() const { return 2.0 / period_s(); }
  // When the controller's j-th reading is taken (j >= 0).
  [[nodiscard]] double reading_time_s(long long j) const;
  // How many processes start in [from_s, to_s).
  [[nodiscard]] long long process_starts(double from_s, double to_s) const;
  // How long work of `work_s` seconds started at `start_s` takes with a stall for each process
  // that starts while it runs (the stalls lengthen it, so later processes can land in it too).
  // `stall_share` in [0, 1]: how much of each stall the work feels (GPU work with queued kernels
  // rides through part of a stall of the host thread that launches them).
  [[nodiscard]] double stalled_duration_s(double start_s, double work_s, double stall_share = 1.0) const;
  // The chance that work of `work_s` started at a random moment is stalled at least k times.
  [[nodiscard]] double stalled_at_least(int k, double work_s) const;
  // The median step of a long series of back-to-back steps of `work_s` (continuous in every
  // parameter, for fitting). Such a series catches every process start: it holds 2 / period_s()
  // stalls per second, whatever its steps.
  [[nodiscard]] double median_step_s(double work_s) const;
};

// Throws Error(usage) unless 0 < process_s <= 10, 0 <= stall_s < process_s and 0 <= sleep_s <= 10.
void check_spawned_sampler(const SpawnedSampler& sampler);

}  // namespace gpucap::sim
