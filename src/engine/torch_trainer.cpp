#include "gpucap/engine/torch_trainer.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/torch.h>

#if AT_PARALLEL_OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <chrono>
#include <limits>

#include "gpucap/core/error.hpp"
#include "torch_support.hpp"

namespace gpucap::engine {

namespace {

constexpr int kMaxInputSize = 4096;
constexpr int kMaxBatch = 1'000'000;
// Streams of the synthetic data: images and labels of one batch, and training and inference
// batches of the same index, are drawn from different seeds.
constexpr std::uint64_t kTrainingStream = 1;
constexpr std::uint64_t kInferenceStream = 2;
constexpr std::uint64_t kLabelStream = 3;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// The seed of batch `index`: a function of (seed, stream, index) alone, so a redone step, or the
// same step on another device, sees the same images and labels.
std::uint64_t batch_seed(std::uint64_t seed, std::uint64_t stream, std::int64_t index) {
  return splitmix64(splitmix64(seed ^ (stream << 56)) ^ static_cast<std::uint64_t>(index));
}

struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

struct Stage {
  std::string file;
  torch::jit::Module module;
  std::vector<NamedTensor> parameters;
  std::vector<NamedTensor> buffers;      // batch-norm running statistics and counters
  std::vector<torch::Tensor> momentum;   // one per parameter; undefined for a frozen one
};

std::vector<NamedTensor> named(const torch::jit::named_parameter_list& list) {
  std::vector<NamedTensor> out;
  for (const auto& item : list) out.push_back({item.name, item.value});
  return out;
}

std::vector<NamedTensor> named(const torch::jit::named_buffer_list& list) {
  std::vector<NamedTensor> out;
  for (const auto& item : list) out.push_back({item.name, item.value});
  return out;
}

std::string shape_text(const torch::Tensor& tensor) { return fmt::format("{}", fmt::join(tensor.sizes(), "×")); }

// Every tensor of the persistent state, in a fixed order (parameters, buffers, momentum buffers,
// stage by stage), with its state name.
template <typename Stages, typename Visit>
void for_each_state_tensor(Stages& stages, Visit&& visit) {
  for (std::size_t k = 0; k < stages.size(); ++k) {
    auto& stage = stages[k];
    const auto prefix = fmt::format("stage{}/", k + 1);
    for (auto& p : stage.parameters) visit(prefix + p.name, p.tensor);
    for (auto& b : stage.buffers) visit(prefix + b.name, b.tensor);
    for (std::size_t i = 0; i < stage.momentum.size(); ++i) {
      if (stage.momentum[i].defined()) visit("momentum/" + prefix + stage.parameters[i].name, stage.momentum[i]);
    }
  }
}

// Stages in eval mode (batch norm on its running statistics) while it lives.
class EvalMode {
 public:
  explicit EvalMode(std::vector<Stage>& stages) : stages_(stages) {
    for (auto& stage : stages_) stage.module.eval();
  }
  ~EvalMode() {
    for (auto& stage : stages_) stage.module.train(true);
  }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  std::vector<Stage>& stages_;
};

// A copy of `tensor` in freshly allocated memory on `device`, even when it is there already.
torch::Tensor fresh_copy(const torch::Tensor& tensor, const torch::Device& device) {
  return tensor.detach().to(device, tensor.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
}

// The buffers of the stages a step has run forward, as they were before: batch norm updates its
// running statistics during the forward pass, and an abandoned step must leave them as it found them.
class BufferBackup {
 public:
  void save(const Stage& stage) {
    std::vector<torch::Tensor> copies;
    for (const auto& b : stage.buffers) copies.push_back(b.tensor.clone());
    saved_.push_back({&stage, std::move(copies)});
  }
  void restore() {
    const torch::NoGradGuard no_grad;
    for (auto& [stage, copies] : saved_) {
      for (std::size_t i = 0; i < copies.size(); ++i) stage->buffers[i].tensor.copy_(copies[i]);
    }
    saved_.clear();
  }

 private:
  std::vector<std::pair<const Stage*, std::vector<torch::Tensor>>> saved_;
};

class LibTorchTrainer final : public TorchTrainer {
 public:
  explicit LibTorchTrainer(const TorchTrainerOptions& options);

  [[nodiscard]] std::string name() const override;
  [[nodiscard]] std::string device() const override { return device_.str(); }
  [[nodiscard]] int stage_count() const override { return static_cast<int>(stages_.size()); }
  [[nodiscard]] int classes() const override { return static_cast<int>(classes_); }
  bool step(const YieldCheck& yield) override;
  bool infer_step(const YieldCheck& yield) override;
  [[nodiscard]] std::int64_t steps_done() const override { return steps_done_; }
  [[nodiscard]] std::int64_t inferences_done() const override { return inferences_done_; }
  [[nodiscard]] double last_loss() const override { return last_loss_; }
  StateTransfer move_to(const std::string& device) override;
  [[nodiscard]] std::int64_t state_bytes() const override;
  [[nodiscard]] std::int64_t variable_count() const override;
  [[nodiscard]] std::vector<StateTensor> state() const override;
  void set_threads(int threads) override;
  [[nodiscard]] int intra_op_threads() const override { return intra_op_threads_; }

 private:
  void load_stages();
  void check_chain();
  [[nodiscard]] torch::Tensor run_stage(std::size_t k, const torch::Tensor& input);
  [[nodiscard]] torch::Tensor images(std::uint64_t stream, std::int64_t index) const;
  [[nodiscard]] torch::Tensor labels(std::int64_t index) const;
  bool try_step(const YieldCheck& yield, BufferBackup& backup);
  void update();
  void clear_gradients();
  void apply_thread_limit();

  TorchTrainerOptions options_;
  torch::Device device_{torch::kCPU};
  std::vector<Stage> stages_;
  std::int64_t classes_ = 0;
  std::int64_t steps_done_ = 0;
  std::int64_t inferences_done_ = 0;
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();
  int intra_op_threads_ = 0;
};

bool asked_to_yield(const YieldCheck& yield) { return yield && yield(); }

LibTorchTrainer::LibTorchTrainer(const TorchTrainerOptions& options) : options_(options) {
  if (options.stage_files.empty()) throw usage_error("a training job needs its model: one TorchScript file or its stages");
  if (options.batch_size < 1 || options.batch_size > kMaxBatch) {
    throw usage_error(fmt::format("batch size {} must be between 1 and {}", options.batch_size, kMaxBatch));
  }
  if (options.input_size < 8 || options.input_size > kMaxInputSize) {
    throw usage_error(fmt::format("input size {} must be between 8 and {}", options.input_size, kMaxInputSize));
  }
  if (!(options.learning_rate > 0.0)) throw usage_error(fmt::format("learning rate {} must be > 0", options.learning_rate));
  if (!(options.momentum >= 0.0 && options.momentum < 1.0)) {
    throw usage_error(fmt::format("momentum {} must be in [0, 1)", options.momentum));
  }
  set_threads(options.threads);
  device_ = parse_torch_device(options.device);
  if (options.deterministic) {
    auto& context = at::globalContext();
    context.setDeterministicAlgorithms(true, /*warn_only=*/false);
    context.setDeterministicCuDNN(true);
    context.setBenchmarkCuDNN(false);
  }
  load_stages();
  check_chain();
}

void LibTorchTrainer::load_stages() {
  for (const auto& file : options_.stage_files) {
    Stage stage;
    stage.file = file;
    stage.module = load_torchscript(file, device_);
    stage.module.train(true);
    stage.parameters = named(stage.module.named_parameters(/*recurse=*/true));
    stage.buffers = named(stage.module.named_buffers(/*recurse=*/true));
    // Zero momentum from the start (as TensorFlow's momentum slots): the state has its full size
    // before the first step, and buf = momentum·0 + grad on it is torch.optim.SGD's first step.
    for (const auto& p : stage.parameters) {
      stage.momentum.push_back(p.tensor.requires_grad() ? torch::zeros_like(p.tensor) : torch::Tensor());
    }
    stages_.push_back(std::move(stage));
  }
  const bool trainable = std::any_of(stages_.begin(), stages_.end(), [](const Stage& s) {
    return std::any_of(s.momentum.begin(), s.momentum.end(), [](const torch::Tensor& m) { return m.defined(); });
  });
  if (!trainable) {
    throw Error(ErrorCode::invalid_data,
                fmt::format("{}: no parameter to train", fmt::join(options_.stage_files, ", ")));
  }
}

torch::Tensor LibTorchTrainer::run_stage(std::size_t k, const torch::Tensor& input) {
  auto output = stages_[k].module.forward({input});
  if (!output.isTensor()) {
    throw Error(ErrorCode::invalid_data, fmt::format("{} (stage {} of {}): returns a {}, not one tensor", stages_[k].file,
                                                     k + 1, stages_.size(), output.tagKind()));
  }
  return output.toTensor();
}

// One image through the stages in eval mode, before any step: stages that do not chain, or a last
// stage that is not a classifier, are an error now rather than in the middle of a run.
void LibTorchTrainer::check_chain() {
  const torch::jit::GraphOptimizerEnabledGuard plain_interpreter(false);  // see step()
  const torch::InferenceMode inference;
  const EvalMode eval(stages_);
  auto x = torch::zeros({1, 3, options_.input_size, options_.input_size}, torch::TensorOptions(device_));
  for (std::size_t k = 0; k < stages_.size(); ++k) {
    try {
      x = run_stage(k, x);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {  // LibTorch's: c10::Error, or the interpreter's std::runtime_error
      const auto what = k == 0 ? fmt::format("a 1×3×{0}×{0} image", options_.input_size)
                               : fmt::format("the output of stage {} ({}, {})", k, stages_[k - 1].file, shape_text(x));
      throw Error(ErrorCode::invalid_data, fmt::format("{} (stage {} of {}) does not take {}: {}", stages_[k].file, k + 1,
                                                       stages_.size(), what, error_summary(e)));
    }
  }
  if (x.dim() != 2 || x.size(0) != 1 || x.size(1) < 2) {
    throw Error(ErrorCode::invalid_data, fmt::format("{}: the last stage returns {}, not batch × classes (2 or more)",
                                                     stages_.back().file, shape_text(x)));
  }
  classes_ = x.size(1);
}

std::string LibTorchTrainer::name() const {
  return fmt::format("LibTorch trainer {} ({} stage{}, {}, batch {})", stages_.front().file, stages_.size(),
                     stages_.size() == 1 ? "" : "s", device_.str(), options_.batch_size);
}

torch::Tensor LibTorchTrainer::images(std::uint64_t stream, std::int64_t index) const {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(batch_seed(options_.seed, stream, index));
  const auto size = options_.input_size;
  // Drawn on the CPU whatever the device, so a step sees the same batch wherever it runs.
  return torch::rand({options_.batch_size, 3, size, size}, generator, torch::kFloat32).to(device_);
}

torch::Tensor LibTorchTrainer::labels(std::int64_t index) const {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(batch_seed(options_.seed, kLabelStream, index));
  return torch::randint(classes_, {options_.batch_size}, generator, torch::kLong).to(device_);
}

bool LibTorchTrainer::step(const YieldCheck& yield) {
  apply_thread_limit();
  // The plain TorchScript interpreter: the profiling executor re-optimises a graph after its first
  // runs (autodiff subgraphs, specialisation), so a stage that has run more often — as stages of
  // abandoned steps have — could compute different bits. Thread-local in LibTorch.
  const torch::jit::GraphOptimizerEnabledGuard plain_interpreter(false);
  const torch::AutoGradMode with_gradients(true);  // whatever the calling thread had
  BufferBackup backup;
  bool completed = false;
  try {
    completed = try_step(yield, backup);
  } catch (const std::exception& e) {  // ours, or LibTorch's (c10::Error, the interpreter's std::runtime_error)
    backup.restore();
    clear_gradients();
    if (dynamic_cast<const Error*>(&e) != nullptr) throw;
    throw Error(ErrorCode::device, fmt::format("{}: training step {} failed: {}", name(), steps_done_, error_summary(e)));
  }
  if (!completed) backup.restore();
  clear_gradients();
  synchronize(device_);
  if (completed) ++steps_done_;
  return completed;
}

// Forward stage by stage, then backward stage by stage (each stage's input is a leaf, so the
// gradient with respect to it is what the stage before back-propagates), then the update: a
// preemption point before each of the 2N + 1.
bool LibTorchTrainer::try_step(const YieldCheck& yield, BufferBackup& backup) {
  const auto n = stages_.size();
  std::vector<torch::Tensor> inputs(n);
  std::vector<torch::Tensor> outputs(n);
  torch::Tensor x = images(kTrainingStream, steps_done_);
  for (std::size_t k = 0; k < n; ++k) {
    if (asked_to_yield(yield)) return false;
    backup.save(stages_[k]);
    inputs[k] = k == 0 ? x : x.detach().requires_grad_(true);
    // A stage may begin with an in-place op (a ReLU(inplace=True) right after a cut), which
    // autograd refuses on a leaf: the stage gets a copy, the gradient still reaches the leaf.
    x = outputs[k] = run_stage(k, k == 0 ? x : inputs[k].clone());
  }
  const auto loss = torch::nn::functional::cross_entropy(x, labels(steps_done_));
  torch::Tensor upstream;  // the loss's gradient with respect to stage k's output
  for (std::size_t k = n; k-- > 0;) {
    if (asked_to_yield(yield)) return false;
    if (k == n - 1) {
      loss.backward();
    } else if (upstream.defined() && outputs[k].requires_grad()) {  // else nothing to train before
      outputs[k].backward(upstream);
    }
    if (k > 0) upstream = inputs[k].grad();
  }
  if (asked_to_yield(yield)) return false;
  update();
  last_loss_ = loss.item<double>();
  return true;
}

// SGD with momentum, as torch.optim.SGD (no dampening, no Nesterov, no weight decay):
// buf = momentum·buf + grad; p -= lr·buf.
void LibTorchTrainer::update() {
  const torch::NoGradGuard no_grad;
  for (auto& stage : stages_) {
    for (std::size_t i = 0; i < stage.parameters.size(); ++i) {
      auto& p = stage.parameters[i].tensor;
      const auto& grad = p.grad();
      if (!grad.defined() || !stage.momentum[i].defined()) continue;  // unused in this step, or frozen
      stage.momentum[i].mul_(options_.momentum).add_(grad);
      p.add_(stage.momentum[i], -options_.learning_rate);
    }
  }
}

void LibTorchTrainer::clear_gradients() {
  for (auto& stage : stages_) {
    for (auto& p : stage.parameters) p.tensor.mutable_grad().reset();
  }
}

bool LibTorchTrainer::infer_step(const YieldCheck& yield) {
  apply_thread_limit();
  const torch::jit::GraphOptimizerEnabledGuard plain_interpreter(false);
  const torch::InferenceMode inference;
  bool completed = true;
  try {
    const EvalMode eval(stages_);
    auto x = images(kInferenceStream, inferences_done_);
    for (std::size_t k = 0; k < stages_.size() && completed; ++k) {
      completed = !asked_to_yield(yield);
      if (completed) x = run_stage(k, x);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // LibTorch's (c10::Error, the interpreter's std::runtime_error)
    throw Error(ErrorCode::device,
                fmt::format("{}: inference batch {} failed: {}", name(), inferences_done_, error_summary(e)));
  }
  synchronize(device_);
  if (completed) ++inferences_done_;
  return completed;
}

StateTransfer LibTorchTrainer::move_to(const std::string& device) {
  const auto target = parse_torch_device(device);  // before anything moves
  apply_thread_limit();
  const auto start = std::chrono::steady_clock::now();
  const torch::NoGradGuard no_grad;
  clear_gradients();
  // Every copy first, then swap them in: a copy that fails (out of memory) leaves the state where
  // it was. The sources stay allocated until then, as SwitchFlow's do until its copies finish.
  std::vector<torch::Tensor*> tensors;
  std::vector<torch::Tensor> copies;
  try {
    for_each_state_tensor(stages_, [&](const std::string&, torch::Tensor& t) {
      tensors.push_back(&t);
      copies.push_back(fresh_copy(t, target));
    });
    synchronize(target);
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::device, fmt::format("{}: moving the state to {} failed: {}", name(), device, error_summary(e)));
  }
  StateTransfer transfer;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    transfer.bytes += static_cast<std::int64_t>(copies[i].nbytes());
    ++transfer.variables;
    // The tensor keeps its identity (the TorchScript module holds the parameters and buffers) and
    // takes the copy's memory; the old memory is freed.
    tensors[i]->set_data(copies[i]);
  }
  device_ = target;
  transfer.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return transfer;
}

std::int64_t LibTorchTrainer::state_bytes() const {
  std::int64_t bytes = 0;
  for_each_state_tensor(stages_, [&](const std::string&, const torch::Tensor& t) {
    bytes += static_cast<std::int64_t>(t.nbytes());
  });
  return bytes;
}

std::int64_t LibTorchTrainer::variable_count() const {
  std::int64_t count = 0;
  for_each_state_tensor(stages_, [&](const std::string&, const torch::Tensor&) { ++count; });
  return count;
}

std::vector<StateTensor> LibTorchTrainer::state() const {
  std::vector<StateTensor> out;
  for_each_state_tensor(stages_, [&](const std::string& name, const torch::Tensor& t) {
    const auto host = t.detach().to(torch::kCPU).contiguous();
    StateTensor s;
    s.name = name;
    s.dtype = std::string(c10::toString(host.scalar_type()));
    s.shape.assign(host.sizes().begin(), host.sizes().end());
    s.bytes.assign(static_cast<const char*>(host.data_ptr()), host.nbytes());
    s.data_address = reinterpret_cast<std::uintptr_t>(t.data_ptr());
    out.push_back(std::move(s));
  });
  return out;
}

void LibTorchTrainer::set_threads(int threads) {
  if (threads < 0) throw usage_error(fmt::format("threads {} must be 0 (LibTorch's default) or more", threads));
  options_.threads = threads;
}

// What the thread limit restricts, and what it does not. LibTorch's at::set_num_threads() is
// process-wide: besides the calling thread's OpenMP setting it stores a default that every thread
// adopts when LibTorch first runs a parallel op on it — it would restrict a high-priority job on
// another thread too. With LibTorch's OpenMP backend (Debian's, and pytorch.org's builds) the
// number of threads of an OpenMP parallel region is a per-thread setting (the nthreads-var ICV),
// so the limit is set with omp_set_num_threads() on the thread that runs the job's work:
//  - restricted: ATen's intra-op parallel loops and oneDNN (MKL-DNN, OpenMP-threaded) started from
//    that thread — on the CPU, the whole forward, backward (autograd runs a CPU-only graph on the
//    calling thread) and update;
//  - not restricted: other threads (another job keeps its own setting: this is the isolation),
//    autograd's CUDA device threads (they run host work of a CUDA backward), inter-op threads, a
//    BLAS library's own thread pool (Debian's LibTorch calls the system libblas.so.3: the
//    reference BLAS is single-threaded, an OpenBLAS in its place has its own pool), MKL's setting;
//  - not isolated at all: cores. Threads are capped, not pinned; the OS shares the cores among all
//    jobs' threads, so a job at N threads still competes with the others (as SwitchFlow's
//    low-priority pool does: it limits active workers, it does not reserve cores).
// The setting stays on the calling thread after the call returns (that thread is the job's).
void LibTorchTrainer::apply_thread_limit() {
#if AT_PARALLEL_OPENMP
  // What this module last set on this thread: a step that changes nothing costs nothing.
  thread_local int applied = 0;
  if (options_.threads != applied) {
    // LibTorch initialises a thread's setting lazily, on its first parallel op, from the process
    // default: have it do so now, or it would overwrite the limit set below.
    (void)at::get_num_threads();
    if (options_.threads > 0) {
      omp_set_num_threads(options_.threads);
    } else {
      at::init_num_threads();  // this thread back to the process default
    }
    applied = options_.threads;
  }
#else
  // Another parallel backend (native thread pool, TBB): its setting is process-wide only.
  if (options_.threads > 0 && at::get_num_threads() != options_.threads) at::set_num_threads(options_.threads);
#endif
  intra_op_threads_ = at::get_num_threads();
}

}  // namespace

std::unique_ptr<TorchTrainer> make_torch_trainer(const TorchTrainerOptions& options) {
  return std::make_unique<LibTorchTrainer>(options);
}

}  // namespace gpucap::engine
