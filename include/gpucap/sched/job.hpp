#pragma once
// A job of `gpucap share` (SwitchFlow, Middleware'21): a model run in steps on a shared device —
// training steps (forward + backward + optimizer update) or inference batches — with a priority,
// a length and an arrival time. Parsed from the command line's
//   NAME=MODE:MODEL[:batch=B][:priority=high|low|N][:steps=N|:requests=N|:duration=S|:until=JOB]
//       [:start=S][:warmup=N][:rate=R][:slo_ms=X][:input=synthetic|jpeg][:reuse=GROUP]

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpucap::sched {

enum class Mode { inference, training };

[[nodiscard]] const char* to_string(Mode mode);

// SwitchFlow's values (tf.set_execution_priority): HIGH = 2, LOW = 1. Larger runs first.
inline constexpr int priority_low = 1;
inline constexpr int priority_high = 2;

struct JobSpec {
  std::string name;
  Mode mode = Mode::training;
  std::string model;
  int batch_size = 32;
  int priority = priority_low;
  // How long the job runs: exactly one of these. An inference job's requests are sent back to
  // back (closed loop, as SwitchFlow's scripts do) or, with rate_per_s, one every 1/rate seconds
  // (open loop: a request waits while the ones before it are served); each is one batch, its
  // latency measured from when it was sent.
  std::optional<int> steps;
  std::optional<int> requests;
  std::optional<double> duration_s;
  std::optional<std::string> until;     // runs until that job has ended (a background job)
  double start_s = 0.0;                 // arrival, seconds after the run starts
  int warmup = 0;                       // first steps (requests) left out of the figures
  std::optional<double> rate_per_s;     // inference: requests per second, open loop
  std::optional<double> slo_ms;         // latency objective of an inference job (under a power cap)
  // Where the batches come from: synthetic tensors (SwitchFlow's Figs. 6–7) or JPEG files decoded
  // and resized by an input pipeline on the host (its Figs. 3 and 8–10).
  bool jpeg_input = false;
  // Input reuse (SwitchFlow Figs. 8–9): jobs with the same group share one input pipeline, in
  // lock step — one host stage per batch for all of them, then each one's device stage.
  std::optional<std::string> reuse_input;
};

// One --job value; Error(usage) naming the job and the part that is wrong. A job without a
// length runs `default_steps` steps (training) or requests (inference).
[[nodiscard]] JobSpec parse_job_spec(std::string_view text, int default_steps = 100);

// Throws Error(usage) for two jobs with one name, no job, an until= that names no other job, or
// jobs whose until= wait for each other in a cycle (none of them would ever end).
void check_jobs(const std::vector<JobSpec>& jobs);

// The spec written back in the form parse_job_spec reads.
[[nodiscard]] std::string to_spec_string(const JobSpec& job);

}  // namespace gpucap::sched
