#pragma once
// The worker side of the MPS protocol (runtime/mps_protocol.hpp), which `gpucap mps-worker` runs
// over the LibTorch engine: load the model, say ready with the share found in the environment,
// then answer each run command with one measurement, as PctoDL's workers do (§2.2 of the seed
// notes): a warm-up loop of forward passes, then a measurement loop, images / elapsed seconds.

#include <exception>
#include <functional>
#include <memory>

#include "gpucap/engine/engine.hpp"
#include "gpucap/runtime/mps_protocol.hpp"

namespace gpucap::runtime {

struct MpsMeasurement {
  long long images = 0;
  double seconds = 0.0;
  int batch = 0;  // the batch size actually used
};

// Whether an engine's exception is an out-of-memory error (LibTorch: "CUDA out of memory").
[[nodiscard]] bool is_out_of_memory(const std::exception& error);

// Forward passes at run.batch for run.warmup_s, then for at least run.measure_s (at least one
// batch), timed with now_s. On an out-of-memory error the batch is halved and the round starts
// over (upstream's OOM guard); at batch 1 the error is rethrown.
[[nodiscard]] MpsMeasurement measure_mps_round(engine::Engine& engine, const MpsCommand& run,
                                               const std::function<double()>& now_s);

using EngineLoader = std::function<std::unique_ptr<engine::Engine>()>;

// The whole worker: loads the engine, sends ready, answers run commands until quit or the end of
// the input. Any failure (the engine does not load, a run fails, a command is malformed) is sent
// as an error message before it is rethrown, so that gpucap can say why the worker stopped.
void serve_mps_worker(const EngineLoader& load_engine, int in_fd, int out_fd, const std::function<double()>& now_s);

}  // namespace gpucap::runtime
