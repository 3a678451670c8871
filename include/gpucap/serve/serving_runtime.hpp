#pragma once
// Serving in real time, behind a server: many threads submit requests (the HTTP handlers), one
// thread drives the GPU — the serving core's decisions, the loop's batches and windows, the
// controller — and answers each request when its batch is done. Time is the wall clock since the
// start (times `pace` for the twin, whose virtual time is kept on it: the twin idles up to the
// present before each decision and its paced engine lets a batch end when the wall clock reaches
// the batch's end). What a batch computes is the caller's (the Executor): the twin's time alone,
// or a real engine on the requests' data, which the caller keeps by request id.
//
// Stopping: drain() refuses new requests (answered `stopping`), runs what is queued and in
// flight to its end, then puts the GPU's settings back; nothing admitted is dropped. A drain told
// to give up on a hung batch does so once the batch running has passed the batch timeout (the GPU
// is stalled): it answers what is left `stopping`, puts the GPU's settings back at once and leaves
// the GPU thread in its batch (abandoned()). The owner then ends the process without destroying
// the runtime, whose destructor would wait for that batch.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gpucap/serve/cap_state.hpp"
#include "gpucap/serve/serving_core.hpp"
#include "gpucap/serve/serving_loop.hpp"

namespace gpucap::serve {

enum class AnswerKind {
  ok,         // the batch ran: the caller reads its outputs by id
  shed,       // refused at admission by the controller's admit rate: 429 with Retry-After
  refused,    // refused by the queue (full, too large, bad priority): 503 or 400
  timed_out,  // its queue timeout expired before a batch took it
  failed,     // its batch failed on the engine
  stopping,   // the server is shutting down
  stalled,    // the GPU has run one batch past RuntimeOptions::batch_timeout_s: 503
};

struct Answer {
  AnswerKind kind = AnswerKind::ok;
  AdmissionResult admission = AdmissionResult::accepted;  // refused: why
  std::string message;
  double retry_after_s = 0.0;
  double queue_s = 0.0;    // from arrival to its batch's start
  double compute_s = 0.0;  // its batch's time
  int batch_items = 0;     // the batch it ran in
};

struct RuntimeOptions {
  double slo_s = 0.1;
  BatcherConfig batcher;
  LatencyStatsConfig stats;
  // Virtual seconds per wall second on the twin (1: real time); 1 on a real GPU.
  double pace = 1.0;
  // Called on the GPU thread when it failed, after every admitted request was answered `failed`,
  // without the runtime's lock: the owner should drain from another thread (drain() joins this
  // one and rethrows the failure) rather than stay up answering 503. It must not call back into
  // the runtime.
  std::function<void()> on_failure;
  // Wall seconds a batch may run before the GPU counts as stalled (a hung engine or driver): until
  // that batch returns, new requests are answered `stalled` at once, serving() is false, and a
  // caller waiting for an answer may give up (stalled()). nullopt: never.
  std::optional<double> batch_timeout_s;
  // Run on the GPU thread before anything is set up (no GPU setting written, no window open),
  // e.g. the engine's warm-up: PyTorch keeps cuDNN's execution plans per thread, so a warm-up on
  // another thread leaves each batch size's first run on this one slow. Its error ends the
  // constructor.
  std::function<void()> prepare;
};

class ServingRuntime {
 public:
  // Runs the batch (on the GPU thread, without the core's lock): the twin's time, or a real
  // engine on the requests' data. Its errors fail the batch's requests.
  using Executor = std::function<BatchRun(ServingLoop& loop, const Launch& launch)>;
  // Told of each window as it closes, on the GPU thread.
  using WindowSink = std::function<void(const ServingWindow& window)>;
  // Told of the newest power sample after each batch or idle, on the GPU thread.
  using SampleSink = std::function<void(const PowerSample& sample, double cap_w)>;

  // Starts the GPU thread, runs options.prepare on it, then applies the controller's first knobs
  // (Error before anything is written) and lets the thread serve. Everything passed must outlive
  // the runtime.
  ServingRuntime(runtime::Platform& platform, control::ServingController& controller, CapState& cap,
                 RuntimeOptions options, Executor executor, WindowSink on_window = {}, SampleSink on_sample = {});
  ~ServingRuntime();
  ServingRuntime(const ServingRuntime&) = delete;
  ServingRuntime& operator=(const ServingRuntime&) = delete;

  // A place held in the queue for a request whose body is still coming (arrive_early). submit()
  // with it admits the request on it; dropped unused, the place is given back.
  class HeldPlace {
   public:
    explicit HeldPlace(ServingRuntime& runtime) : runtime_(runtime) {}
    ~HeldPlace();
    HeldPlace(const HeldPlace&) = delete;
    HeldPlace& operator=(const HeldPlace&) = delete;

   private:
    friend class ServingRuntime;
    ServingRuntime& runtime_;
    bool used_ = false;
  };
  // A request that has arrived now, before its body is read, decided for good: shed or refused on
  // a stalled GPU (refusal: its 429 or 503), let through on a place held for it (place: give it to
  // submit()), or, when the
  // core is busy for longer than the waiting thread may wait (200 us), neither: submit() decides.
  struct EarlyArrival {
    std::optional<Answer> refusal;
    std::shared_ptr<HeldPlace> place;
  };
  [[nodiscard]] EarlyArrival arrive_early();

  // A request of `items` items arrives now. `id` is the caller's key for its payload (unique while
  // the request lives). The future is ready when it was refused (at once) or answered. `place`:
  // the one arrive_early() held for it, if any.
  [[nodiscard]] std::future<Answer> submit(std::uint64_t id, int items, int priority, std::optional<double> timeout_s,
                                           const std::shared_ptr<HeldPlace>& place = nullptr);
  // Seconds since serving started (the clock arrivals and the cap use).
  [[nodiscard]] double now_s() const;
  // Requests admitted and still queued, not yet in a batch (Triton's pending request count: Triton
  // counts a request out when its execution starts).
  [[nodiscard]] std::size_t pending() const;
  // Requests admitted and not yet answered: queued or in a batch.
  [[nodiscard]] std::size_t in_flight() const;
  // Every request and batch counted since the start (the core's totals).
  [[nodiscard]] WindowCounts counts() const;
  // The SLO statistics of the last window of time (see LatencyStats).
  [[nodiscard]] LatencySummary slo() const;
  // Wakes the GPU thread to look at the cap now (after a source set it), rather than at its next
  // decision.
  void cap_changed();
  // What drain() does with a batch that does not return.
  enum class HungBatch {
    wait,     // wait for it (the destructor's drain)
    give_up,  // once the GPU is stalled (RuntimeOptions::batch_timeout_s), leave the GPU thread in it
  };
  // Refuses new requests, answers everything admitted, stops the GPU thread and restores the GPU.
  // Returns the loop's totals. Idempotent. Rethrows a failure of the GPU thread. HungBatch::give_up:
  // if the batch running is or becomes stalled before the thread stops, every request still
  // admitted is answered `stopping`, the GPU's settings are restored while the batch runs on (the
  // platform's engine and device must allow that from two threads: NVML does, the twin's
  // SimPlatform guards its twin), and the totals so far (without the last, unfinished window)
  // are returned; abandoned() is then true.
  ServingTotals drain(HungBatch hung = HungBatch::wait);
  // A drain gave up on a batch that had not returned: the GPU thread may still be in it.
  [[nodiscard]] bool abandoned() const;
  // The drain gave up while the loop waited on the GPU's driver between batches, not on a batch.
  [[nodiscard]] bool abandoned_in_device_call() const;
  // When the drain gave up: why the GPU's settings could not be put back (nullopt: they were).
  [[nodiscard]] std::optional<std::string> abandoned_restore_error() const;
  [[nodiscard]] bool draining() const;
  // Neither draining, nor stopped by a failure of the GPU thread, nor stalled: what a readiness
  // probe asks.
  [[nodiscard]] bool serving() const;
  // The batch running now has run longer than RuntimeOptions::batch_timeout_s, or a call to the
  // GPU's driver between batches (a knob write, a clock read) has waited that long.
  [[nodiscard]] bool stalled() const;
  // What a request is told when the GPU has stalled (kind `stalled`).
  [[nodiscard]] Answer stalled_answer() const;
  // Its caller would give up on request `id` because the GPU stalled. withdrawn: it was queued,
  // and is now out of the queue and answered `stalled` (it will never run); in_batch: it is in a
  // batch or was answered meanwhile; not_stalled: the GPU is no longer stalled, nothing was done.
  enum class Withdrawal { withdrawn, in_batch, not_stalled };
  Withdrawal withdraw(std::uint64_t id);

 private:
  void gpu_thread();
  // The core and the loop (the first knobs applied), and the start of serving's time.
  void set_up(control::ServingController& controller, SampleSink on_sample);
  void give_back_place();
  void answer(std::uint64_t id, Answer answer);
  void answer_everyone(AnswerKind kind, const std::string& message);  // every admitted request
  // False when the drain gave up while the batch ran: the loop is no longer the GPU thread's.
  [[nodiscard]] bool run_one(const Launch& launch, std::unique_lock<std::mutex>& lock);
  void abandon_locked();  // answers everyone and marks the GPU thread given up on (mutex_ held)
  ServingTotals restore_beside_the_hung_batch();  // then, without mutex_: the GPU's settings back
  [[nodiscard]] std::chrono::steady_clock::time_point wall_at(double t_s) const;
  [[nodiscard]] bool stalled_locked() const;  // stalled(), with mutex_ held
  [[nodiscard]] Answer stalled_answer_locked() const;  // stalled_answer(), with mutex_ held

  runtime::Platform& platform_;
  CapState& cap_;
  RuntimeOptions options_;
  Executor executor_;
  WindowSink on_window_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable stopped_cv_;  // notified when stopped_ turns true
  std::uint64_t wake_calls_ = 0;  // submissions, cap changes and the drain that called wake_
  std::unique_ptr<ServingCore> core_;
  std::unique_ptr<ServingLoop> loop_;
  std::map<std::uint64_t, std::promise<Answer>> waiting_;  // admitted, not answered
  bool draining_ = false;
  bool stopped_ = false;
  bool abandoned_ = false;  // a drain gave up on the GPU thread (see drain())
  std::optional<std::string> abandoned_restore_error_;
  std::optional<std::chrono::steady_clock::time_point> batch_started_;  // while the executor runs
  // While the loop waits on the GPU's driver between batches (ServingLoop::DeviceCall), without
  // the lock: a knob write or a clock read that does not return stalls the GPU as a batch does.
  std::optional<std::chrono::steady_clock::time_point> device_call_started_;
  bool abandoned_in_device_call_ = false;  // the drain gave up while the loop was in such a call
  std::exception_ptr failure_;
  ServingTotals totals_;
  std::thread thread_;
};

}  // namespace gpucap::serve
