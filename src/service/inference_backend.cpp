#include "gpucap/service/inference_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "gpucap/core/error.hpp"

namespace gpucap::service {
namespace {

constexpr std::int64_t kImageNetClasses = 1000;

kserve::Tensor zeros(const std::string& name, std::vector<std::int64_t> shape) {
  kserve::Tensor t;
  t.name = name;
  t.datatype = kserve::Datatype::fp32;
  t.shape = std::move(shape);
  t.data.assign(static_cast<std::size_t>(*kserve::element_count(t.shape)) * sizeof(float), std::byte{0});
  return t;
}

kserve::ModelMetadata image_model(const std::string& name, const std::string& platform, int input_size,
                                  int max_batch_size) {
  kserve::ModelMetadata m;
  m.name = name;
  m.versions = {"1"};
  m.platform = platform;
  m.max_batch_size = max_batch_size;
  m.inputs = {{"input", kserve::Datatype::fp32, {-1, 3, input_size, input_size}}};
  m.outputs = {{"output", kserve::Datatype::fp32, {-1, kImageNetClasses}}};
  kserve::validate_model_metadata(m);
  return m;
}

// The twin: the batch takes the twin's time on the loop's platform; the outputs are zeros.
class TwinBackend final : public InferenceBackend {
 public:
  TwinBackend(const std::string& model_id, int input_size, int max_batch_size)
      : metadata_(image_model(model_id, "gpucap_twin", input_size, max_batch_size)) {}
  [[nodiscard]] const kserve::ModelMetadata& metadata() const override { return metadata_; }
  [[nodiscard]] bool simulated() const override { return true; }
  serve::BatchRun run(serve::ServingLoop& loop, const serve::Launch& launch,
                      std::span<const kserve::InferRequest* const> requests,
                      std::vector<std::vector<kserve::Tensor>>& outputs) override {
    auto run = loop.execute(launch);
    outputs.clear();
    for (const auto* r : requests) outputs.push_back({zeros("output", {r->batch_size, kImageNetClasses})});
    return run;
  }

 private:
  kserve::ModelMetadata metadata_;
};

// noop: no time; it answers the first 16 values of each row of its input (all of it at the
// default shape [-1, 16]), so that a large input is measured on its way in without an equally
// large answer on the way out.
constexpr std::int64_t kNoopOutputWidth = 16;

class NoopBackend final : public InferenceBackend {
 public:
  NoopBackend(int max_batch_size, std::vector<std::int64_t> dims) {
    metadata_.name = "noop";
    metadata_.versions = {"1"};
    metadata_.platform = "gpucap_noop";
    metadata_.max_batch_size = max_batch_size;
    std::vector<std::int64_t> shape = {-1};
    shape.insert(shape.end(), dims.begin(), dims.end());
    row_elements_ = *kserve::element_count(dims);
    width_ = std::min<std::int64_t>(static_cast<std::int64_t>(row_elements_), kNoopOutputWidth);
    metadata_.inputs = {{"input", kserve::Datatype::fp32, shape}};
    metadata_.outputs = {{"output", kserve::Datatype::fp32, {-1, width_}}};
    kserve::validate_model_metadata(metadata_);
  }
  [[nodiscard]] const kserve::ModelMetadata& metadata() const override { return metadata_; }
  [[nodiscard]] bool simulated() const override { return false; }
  serve::BatchRun run(serve::ServingLoop& loop, const serve::Launch& /*launch*/,
                      std::span<const kserve::InferRequest* const> requests,
                      std::vector<std::vector<kserve::Tensor>>& outputs) override {
    return loop.execute_with([&] {
      outputs.clear();
      const auto row_bytes = static_cast<std::size_t>(row_elements_) * sizeof(float);
      const auto out_bytes = static_cast<std::size_t>(width_) * sizeof(float);
      for (const auto* r : requests) {
        const auto& in = r->inputs.front();
        kserve::Tensor out;
        out.name = "output";
        out.datatype = kserve::Datatype::fp32;
        out.shape = {r->batch_size, width_};
        out.data.resize(static_cast<std::size_t>(r->batch_size) * out_bytes);
        for (std::int64_t row = 0; row < r->batch_size; ++row) {
          std::memcpy(out.data.data() + static_cast<std::size_t>(row) * out_bytes,
                      in.data.data() + static_cast<std::size_t>(row) * row_bytes, out_bytes);
        }
        outputs.push_back({std::move(out)});
      }
    });
  }

 private:
  kserve::ModelMetadata metadata_;
  std::uint64_t row_elements_ = 0;
  std::int64_t width_ = kNoopOutputWidth;
};

// Engine floats to an FP32 tensor's little-endian bytes (as x86 holds them).
kserve::Tensor from_engine(const std::string& name, const engine::TensorData& d) {
  kserve::Tensor t;
  t.name = name;
  t.datatype = kserve::Datatype::fp32;
  t.shape = d.shape;
  t.data.resize(d.values.size() * sizeof(float));
  std::memcpy(t.data.data(), d.values.data(), t.data.size());
  return t;
}

// A model an engine runs on the requests' data.
class EngineBackend final : public InferenceBackend {
 public:
  EngineBackend(kserve::ModelMetadata metadata, engine::Engine& engine) : metadata_(std::move(metadata)), engine_(engine) {
    kserve::validate_model_metadata(metadata_);
    if (metadata_.inputs.size() != 1) throw usage_error("the LibTorch backend serves models with one input");
  }
  [[nodiscard]] const kserve::ModelMetadata& metadata() const override { return metadata_; }
  [[nodiscard]] bool simulated() const override { return false; }
  serve::BatchRun run(serve::ServingLoop& loop, const serve::Launch& /*launch*/,
                      std::span<const kserve::InferRequest* const> requests,
                      std::vector<std::vector<kserve::Tensor>>& outputs) override {
    return loop.execute_with([&] {
      gather_input(requests);
      const auto results = engine_.run_data(input_);
      if (results.size() != metadata_.outputs.size()) {
        throw Error(ErrorCode::device, fmt::format("the model returned {} outputs; its metadata declares {}", results.size(),
                                                   metadata_.outputs.size()));
      }
      std::vector<kserve::Tensor> tensors;
      for (std::size_t k = 0; k < results.size(); ++k) tensors.push_back(from_engine(metadata_.outputs[k].name, results[k]));
      std::vector<std::int64_t> sizes;
      for (const auto* r : requests) sizes.push_back(r->batch_size);
      outputs = kserve::split_outputs(tensors, sizes);
    });
  }

 private:
  // The requests' inputs stacked into input_, one copy of each byte: the buffer lives as long as the
  // backend (batches come one at a time, from the serving loop's GPU thread), so a batch of images
  // (tens of MB) is not allocated again, and a batch larger than the one before zero-fills only its
  // new tail. With a fresh concatenation and a second copy into a new, zeroed float vector, an H200
  // server answered at most 2,600 ResNet-50 images a second where its GPU ran over 7,000
  // (docs/measurements/2026-11-30-NVIDIA_H200-serve-before*).
  void gather_input(std::span<const kserve::InferRequest* const> requests) {
    parts_.clear();
    for (const auto* request : requests) {
      if (request->inputs.size() != 1) {
        throw Error(ErrorCode::internal, fmt::format("a request with {} inputs reached a one-input model", request->inputs.size()));
      }
      const auto& input = request->inputs.front();
      if (input.datatype != kserve::Datatype::fp32) {
        throw Error(ErrorCode::unsupported, fmt::format("input {} is {}: the engine takes FP32", input.name, kserve::to_string(input.datatype)));
      }
      parts_.push_back(&input);
    }
    auto layout = kserve::batch_layout(parts_);
    input_.shape = std::move(layout.shape);
    input_.values.resize(layout.bytes / sizeof(float));
    kserve::copy_batch(parts_, std::as_writable_bytes(std::span<float>(input_.values)));
  }

  kserve::ModelMetadata metadata_;
  engine::Engine& engine_;
  std::vector<const kserve::Tensor*> parts_;
  engine::TensorData input_;
};

}  // namespace

std::unique_ptr<InferenceBackend> make_twin_backend(const std::string& model_id, int input_size, int max_batch_size) {
  return std::make_unique<TwinBackend>(model_id, input_size, max_batch_size);
}

std::unique_ptr<InferenceBackend> make_noop_backend(int max_batch_size, std::vector<std::int64_t> dims) {
  for (const auto d : dims) {
    if (d < 1) throw usage_error("the noop model's dimensions are positive");
  }
  return std::make_unique<NoopBackend>(max_batch_size, std::move(dims));
}

std::unique_ptr<InferenceBackend> make_engine_backend(kserve::ModelMetadata metadata, engine::Engine& engine) {
  return std::make_unique<EngineBackend>(std::move(metadata), engine);
}

std::uint64_t RequestTable::add(kserve::InferRequest request) {
  auto slot = std::make_shared<Slot>();
  slot->entry.request = std::move(request);
  const std::lock_guard lock(mutex_);
  const auto id = ++next_id_;
  entries_.emplace(id, std::move(slot));
  return id;
}

RequestTable::Entry RequestTable::take(std::uint64_t id) {
  std::shared_ptr<Slot> slot;
  {
    const std::lock_guard lock(mutex_);
    const auto it = entries_.find(id);
    if (it == entries_.end()) throw Error(ErrorCode::internal, fmt::format("request {} is not in flight", id));
    slot = std::move(it->second);
    entries_.erase(it);
  }
  return std::move(slot->entry);
}

void RequestTable::abandon(std::uint64_t id) {
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (it->second->ran) {
    entries_.erase(it);
  } else {
    it->second->abandoned = true;
  }
}

std::size_t RequestTable::size() const {
  const std::lock_guard lock(mutex_);
  return entries_.size();
}

serve::BatchRun RequestTable::run(InferenceBackend& backend, serve::ServingLoop& loop, const serve::Launch& launch) {
  // The slots stay alive while the batch runs (shared), without the table's lock: the HTTP
  // threads add and take others meanwhile. No HTTP thread takes these: their requests wait for
  // this batch's answer, or were abandoned, which leaves the slot to this thread.
  std::vector<std::pair<std::uint64_t, std::shared_ptr<Slot>>> slots;
  std::optional<std::uint64_t> missing;
  {
    const std::lock_guard lock(mutex_);
    for (const auto& r : launch.requests) {
      const auto it = entries_.find(r.id);
      if (it == entries_.end()) {
        if (!missing) missing = r.id;
        continue;
      }
      slots.emplace_back(r.id, it->second);
    }
  }
  // However the batch ends (run, failed, thrown), its slots have run: an abandoned one goes now.
  const auto finish = [this, &slots] {
    const std::lock_guard lock(mutex_);
    for (const auto& [id, slot] : slots) {
      slot->ran = true;
      if (slot->abandoned) entries_.erase(id);
    }
  };
  if (missing) {
    finish();
    serve::BatchRun failed;
    failed.ok = false;
    failed.error = fmt::format("request {} of the batch is not in flight", *missing);
    failed.start_s = failed.end_s = loop.now_s();
    return failed;
  }
  std::vector<const kserve::InferRequest*> requests;
  for (const auto& [id, slot] : slots) requests.push_back(&slot->entry.request);
  std::vector<std::vector<kserve::Tensor>> outputs;
  serve::BatchRun run;
  try {
    run = backend.run(loop, launch, requests, outputs);
  } catch (...) {
    finish();
    throw;
  }
  if (run.ok && outputs.size() == slots.size()) {
    for (std::size_t i = 0; i < slots.size(); ++i) slots[i].second->entry.outputs = std::move(outputs[i]);
  } else if (run.ok) {
    run.ok = false;
    run.error = "the backend returned outputs for a different number of requests";
  }
  finish();
  return run;
}

}  // namespace gpucap::service
