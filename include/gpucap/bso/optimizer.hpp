#pragma once
// The batch-size optimizer's three operations on a job's state — hand out a trial, take an
// epoch's report, end a trial — for Zeus's policy (pruning rounds, then the Gaussian
// Thompson-sampling bandit) and gpucap's (bso/gpucap_policy.hpp). Pure: no clock, no I/O; the
// random stream lives in the state. The service runs each operation inside one database
// transaction; the trace-driven simulator runs the same functions in memory.
//
// An operation either succeeds and changes `job`, or throws Refusal and leaves `job` unchanged.

#include <string>

#include "gpucap/bso/state.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::bso {

// Why a request was refused; the service maps these to HTTP statuses as Zeus does
// (bad_request 400, not_found 404, conflict 409, failed 500).
enum class RefusalKind { bad_request, not_found, conflict, failed };

// The HTTP status of a refusal, as Zeus's server answers it.
[[nodiscard]] constexpr int http_status(RefusalKind kind) noexcept {
  switch (kind) {
    case RefusalKind::bad_request: return 400;
    case RefusalKind::not_found: return 404;
    case RefusalKind::conflict: return 409;
    case RefusalKind::failed: return 500;
  }
  return 500;
}

class Refusal : public Error {
 public:
  Refusal(RefusalKind kind, const std::string& message) : Error(ErrorCode::usage, message), kind_(kind) {}
  [[nodiscard]] RefusalKind kind() const noexcept { return kind_; }

 private:
  RefusalKind kind_;
};

// Zeus's TrialId and TrainingResult.
struct TrialId {
  std::string job_id;
  int batch_size = 0;
  int trial_number = 0;
};

struct TrainingResult {
  TrialId trial;
  double time_s = 0.0;    // cumulative since the trial began
  double energy_j = 0.0;  // cumulative since the trial began
  double metric = 0.0;    // validation metric after current_epoch
  int current_epoch = 0;  // 1, 2, ...
};

struct ReportResponse {
  bool stop_train = false;
  bool converged = false;
  std::string message;
};

// GET /jobs/batch_size: a new Dispatched trial (appended to job.trials).
TrialId next_trial(JobState& job);

// POST /report. Keeps training while the cost is within β × min cost, the epoch is below
// max_epochs and the target is not reached; otherwise the trial succeeds (converged or not) and
// the policy learns from it. A report for a trial that already ended answers stop_train again;
// one that repeats the last epoch answers "keep training" again (a client retrying after a lost
// reply). Refused: unknown trial, wrong batch size, a trial that was ended (Failed), NaN or
// negative time or energy, non-finite metric, epoch below 1 or behind the last report.
ReportResponse report(JobState& job, const TrainingResult& result);

// PATCH /trials: a trial still Dispatched becomes Failed (its client died or gave up); an ended
// trial is left as it is. Refused (not_found) for an unknown trial.
void end_trial(JobState& job, const TrialId& trial);

// The cost of the trial's last report under the job's η and max power.
[[nodiscard]] double trial_cost(const JobState& job, const Trial& trial);

}  // namespace gpucap::bso
