#pragma once
// `gpucap share --platform torch`: the jobs on threads of this process, on a real device, through
// LibTorch (engine/torch_trainer.hpp) — SwitchFlow's scheduler with real preemption and migration,
// or free sharing, in wall-clock time. Models are exported for training in stages
// (scripts/export_models.py --train --stages N): an inference job runs the same stages in eval mode.
//
// Policies (the same rules as the twin's, sched/simulator.hpp):
//  - threads: every job runs its steps on its own thread, nothing coordinates them.
//  - switchflow: one job at a time runs on the device (its executor: an exclusive gate, highest
//    priority first, then by ask order). A job that asks while a lower-priority one holds the gate
//    preempts it at its next stage boundary; the interrupted training step is redone. While a job of
//    higher priority is live, a lower-priority job moves its state to the LPU before its next step
//    and runs there outside the gate, on a restricted thread count; it moves back at its first step
//    after the last such job ended. Without an LPU it waits for the gate instead.

#include <optional>
#include <string>
#include <vector>

#include "gpucap/sched/job.hpp"
#include "gpucap/sched/simulator.hpp"

namespace gpucap::runtime {

struct RealShareJob {
  sched::JobSpec spec;
  std::vector<std::string> stage_files;  // in order
  int input_size = 224;
};

// The job's model in `model_dir`: NAME.train.stages.json (staged) or NAME.train.pt (whole).
// Error(io) when neither exists, Error(invalid_data) for a malformed list.
[[nodiscard]] RealShareJob find_real_share_model(const sched::JobSpec& spec, const std::string& model_dir);

struct RealShareOptions {
  sched::Policy policy = sched::Policy::switchflow;  // threads or switchflow
  std::string device = "cpu";                        // the shared device ("cpu", "cuda:0")
  std::optional<std::string> lpu;                    // where a preempted job goes ("cpu", "cuda:1"); none: it waits
  int lpu_threads = 1;                               // intra-op threads of a job on the LPU (when it is the CPU)
  int threads = 0;                                   // intra-op threads of every other job (0: LibTorch's default)
  std::uint64_t seed = 1;
};

// Runs the jobs to their ends (start= in seconds from now; lengths in steps or requests; until=
// as on the twin) and returns what happened, in wall-clock seconds. Error(usage) for a policy
// other than threads and switchflow, or a job with duration= (use steps or requests).
[[nodiscard]] sched::ShareResult run_real_share(const std::vector<RealShareJob>& jobs, const RealShareOptions& options);

}  // namespace gpucap::runtime
