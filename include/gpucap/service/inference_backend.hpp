#pragma once
// What `gpucap serve` serves: a model's KServe metadata and how a batch of requests becomes their
// outputs, on the serving loop's GPU thread.
//   - twin: the twin of a GPU running a catalogue model — each batch takes the twin's time and
//     power (paced to the wall clock); the outputs are zeros of the declared shape, and every
//     response says it is simulated;
//   - noop: a model that takes no time and answers the first 16 values of each row of its input
//     (input FP32 [-1, 16] by default: its input back), to measure the server itself;
//   - torch: a TorchScript model through the LibTorch engine, on the requests' own data.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gpucap/engine/engine.hpp"
#include "gpucap/serve/serving_loop.hpp"
#include "gpucap/service/kserve_protocol.hpp"

namespace gpucap::service {

class InferenceBackend {
 public:
  InferenceBackend() = default;
  InferenceBackend(const InferenceBackend&) = delete;
  InferenceBackend& operator=(const InferenceBackend&) = delete;
  virtual ~InferenceBackend() = default;

  [[nodiscard]] virtual const kserve::ModelMetadata& metadata() const = 0;
  [[nodiscard]] virtual bool simulated() const = 0;
  // Runs one batch: `requests` in the launch's order; fills `outputs[r]` with request r's outputs
  // (the model's outputs, in its order). Errors fail the batch (BatchRun.ok = false).
  [[nodiscard]] virtual serve::BatchRun run(serve::ServingLoop& loop, const serve::Launch& launch,
                                            std::span<const kserve::InferRequest* const> requests,
                                            std::vector<std::vector<kserve::Tensor>>& outputs) = 0;
};

// An image model of the twin's catalogue: input FP32 [-1, 3, S, S] (S its input size), output
// FP32 [-1, 1000] (ImageNet's classes), named "input" and "output".
[[nodiscard]] std::unique_ptr<InferenceBackend> make_twin_backend(const std::string& model_id, int input_size,
                                                                  int max_batch_size);
// The no-op model "noop": input FP32 [-1, dims...] (default [-1, 16]), output FP32 [-1, 16] (the
// first 16 values of each row; fewer when a row is smaller).
[[nodiscard]] std::unique_ptr<InferenceBackend> make_noop_backend(int max_batch_size,
                                                                  std::vector<std::int64_t> dims = {16});
// A model run by `engine` on the requests' data (its metadata from the engine's model).
[[nodiscard]] std::unique_ptr<InferenceBackend> make_engine_backend(kserve::ModelMetadata metadata,
                                                                    engine::Engine& engine);

// The requests in flight, by the id the serving runtime knows them by: parsed by the HTTP thread,
// read and answered by the GPU thread. Thread-safe.
class RequestTable {
 public:
  struct Entry {
    kserve::InferRequest request;
    std::vector<kserve::Tensor> outputs;
  };
  // A new id for `request`.
  std::uint64_t add(kserve::InferRequest request);
  // The entry of `id`, removed; Error(internal) if there is none.
  Entry take(std::uint64_t id);
  // Its caller answered `id` without waiting for its batch (the GPU stalled): the entry goes now
  // if its batch has run, else once it has (a queued request still runs when the GPU comes back,
  // as the runtime launches it). Unknown ids are ignored.
  void abandon(std::uint64_t id);
  // Runs `backend` on the entries of `launch` (on the GPU thread) and keeps their outputs.
  serve::BatchRun run(InferenceBackend& backend, serve::ServingLoop& loop, const serve::Launch& launch);
  [[nodiscard]] std::size_t size() const;

 private:
  struct Slot {
    Entry entry;
    bool ran = false;        // its batch has run: the outputs are in
    bool abandoned = false;  // no caller will take it
  };
  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 0;
  std::map<std::uint64_t, std::shared_ptr<Slot>> entries_;
};

}  // namespace gpucap::service
