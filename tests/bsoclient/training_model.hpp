#pragma once
// A pretend training for the client's tests: an epoch's time falls with the batch size, the
// epochs needed to reach the target rise with it, and batch size 64 never gets there — so the
// optimizer has a trade-off to find and a size to prune. Time and energy move on a FakeGpu and a
// FakeClock exactly as the test says.

#include "gpucap/bsoclient/client.hpp"
#include "support/fake_gpu.hpp"

namespace gpucap::test {

inline constexpr double kTrainingPowerW = 200.0;

[[nodiscard]] inline double epoch_time_s(int batch_size) { return 4.0 + 256.0 / batch_size; }

[[nodiscard]] inline int epochs_to_target(int batch_size) {
  if (batch_size <= 16) return 2;
  if (batch_size <= 32) return 3;
  return 1000;
}

struct RunOutcome {
  int trial_number = 0;
  int batch_size = 0;
  int epochs = 0;
  bool failed = false;  // BsoTrainFailedError
};

// One recurrence of the job: a fresh client, one trial, epochs until the server says stop.
inline RunOutcome train_once(const bsoclient::ClientOptions& options, const bso::JobSpec& job,
                             monitor::Monitor& meter, FakeGpu& gpu, FakeClock& clock) {
  bsoclient::BsoClient client(options, job, meter);
  RunOutcome outcome;
  outcome.batch_size = client.get_batch_size();
  outcome.trial_number = client.trial()->trial_number;
  client.on_train_begin();
  for (int epoch = 1; epoch <= job.max_epochs + 1; ++epoch) {
    const double seconds = epoch_time_s(outcome.batch_size);
    clock.now_s += seconds;
    gpu.energy_j += seconds * kTrainingPowerW;
    const double metric = 0.6 * epoch / epochs_to_target(outcome.batch_size);
    outcome.epochs = epoch;
    try {
      if (client.on_evaluate(metric)) break;
    } catch (const bsoclient::BsoTrainFailedError&) {
      outcome.failed = true;
      break;
    }
  }
  return outcome;
}

}  // namespace gpucap::test
