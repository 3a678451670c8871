#pragma once
// A training job on LibTorch, preemptible the way SwitchFlow (Middleware'21) preempts one: a
// TorchScript model exported for training (scripts/export_models.py --train [--stages N]) runs
// training steps — forward, cross-entropy loss, backward, SGD with momentum — on synthetic labelled
// images, stage by stage. Between stages the step asks whether to yield; a step that yields is
// abandoned with nothing changed (parameters, batch-norm statistics, momentum) and is redone from
// its start by the next step() call, on the same batch. move_to() moves the job's persistent state
// (parameters, buffers, momentum buffers) to another device, as SwitchFlow moves a preempted job
// to a slower GPU or the CPU and back.
//
// Built only with LibTorch (GPUCAP_HAVE_TORCH), inside the engine plugin; this header names no
// LibTorch type, so the rest of gpucap builds without it. Code linked with LibTorch (the plugin,
// the tests) calls make_torch_trainer(); the gpucap binary calls load_torch_trainer()
// (torch_plugin.hpp), which loads the plugin first.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpucap::engine {

struct TorchTrainerOptions {
  // The model: one TorchScript file, or the stage files in order (NAME.train.stageKofN.pt, listed
  // in NAME.train.stages.json). Each stage takes one tensor and returns one; the first takes
  // batch × 3 × input_size × input_size images, the last returns batch × classes logits.
  std::vector<std::string> stage_files;
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  int batch_size = 8;
  int input_size = 224;        // height = width of the synthetic images
  std::uint64_t seed = 1;      // step k's batch (images and labels) depends only on (seed, k)
  double learning_rate = 0.01;
  double momentum = 0.9;
  int threads = 0;             // intra-op threads of the job's CPU work (set_threads); 0: LibTorch's default
  // LibTorch's deterministic algorithms and cuDNN's deterministic mode, for bitwise-reproducible
  // CUDA runs. Process-wide flags (they affect every LibTorch user in the process); the CPU kernels
  // used here are deterministic at a fixed thread count without them.
  bool deterministic = false;
};

// What one move_to() did.
struct StateTransfer {
  std::int64_t bytes = 0;      // parameters + buffers + momentum buffers
  std::int64_t variables = 0;  // how many tensors that is
  double seconds = 0.0;        // wall time until the copies completed (CUDA synchronised)
};

// One tensor of the job's persistent state, its bytes as stored in memory (a test compares them
// bitwise). Names: "stageK/NAME" for parameters and buffers (K from 1, NAME as in the stage's
// TorchScript module, e.g. "layer1_0_bn1.running_mean"), "momentum/stageK/NAME" for the momentum
// buffer of parameter NAME.
struct StateTensor {
  std::string name;
  std::string dtype;                 // "Float", "Long", ...
  std::vector<std::int64_t> shape;
  std::string bytes;
  std::uintptr_t data_address = 0;   // where the data lies on its device (move_to must change it)
};

// Asked at every preemption point of a step; true: abandon the step.
using YieldCheck = std::function<bool()>;

// One job: not for use by two threads at once (a scheduler calls it from the job's thread; the
// yield check may read a flag that another thread sets).
class TorchTrainer {
 public:
  virtual ~TorchTrainer() = default;
  TorchTrainer() = default;
  TorchTrainer(const TorchTrainer&) = delete;
  TorchTrainer& operator=(const TorchTrainer&) = delete;

  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual std::string device() const = 0;  // where the state is now
  [[nodiscard]] virtual int stage_count() const = 0;
  [[nodiscard]] virtual int classes() const = 0;         // the last stage's output width
  // Preemption points of one training step, where `yield` is asked: before each stage's forward,
  // before each stage's backward (last stage first), and before the update: 2 × stages + 1.
  [[nodiscard]] int preemption_points() const { return 2 * stage_count() + 1; }

  // One training step on batch steps_done(). Returns true when it completed (parameters updated,
  // steps_done() + 1); false when `yield` returned true at a preemption point: the step is
  // abandoned — no parameter or momentum updated, batch-norm statistics put back, gradients
  // dropped — and the next call redoes it. On CUDA it returns once the step's kernels have
  // finished (also those launched before the yield). Error(device) when LibTorch fails
  // (out of memory, ...), with the step abandoned the same way.
  virtual bool step(const YieldCheck& yield = {}) = 0;
  bool step(const std::atomic<bool>& preempt) {
    return step([&preempt] { return preempt.load(std::memory_order_acquire); });
  }
  // One inference batch of the same model (eval mode: batch-norm running statistics, no gradient),
  // stage by stage with a preemption point before each stage; changes no state. Synthetic input
  // from (seed, inferences_done()). For a whole-model inference job that is never preempted,
  // TorchEngine (torch_engine.hpp) is the engine to use.
  virtual bool infer_step(const YieldCheck& yield = {}) = 0;

  [[nodiscard]] virtual std::int64_t steps_done() const = 0;       // completed training steps
  [[nodiscard]] virtual std::int64_t inferences_done() const = 0;  // completed inference batches
  [[nodiscard]] virtual double last_loss() const = 0;              // of the last completed step (NaN before)

  // Moves parameters, buffers and momentum buffers to `device` ("cpu", "cuda", "cuda:N"), each into
  // freshly allocated memory — also to the device they are on, so that "cpu" → "cpu" is a real copy.
  // Error(usage) for a device string LibTorch does not parse, Error(unsupported) for a CUDA device
  // this build or machine lacks; the state is unchanged then.
  virtual StateTransfer move_to(const std::string& device) = 0;
  [[nodiscard]] virtual std::int64_t state_bytes() const = 0;
  [[nodiscard]] virtual std::int64_t variable_count() const = 0;
  [[nodiscard]] virtual std::vector<StateTensor> state() const = 0;  // a copy, on the host

  // Caps the intra-op threads (OpenMP, and oneDNN, which runs on OpenMP) of the job's CPU work at
  // `threads` (0: back to LibTorch's default), for the thread that calls step(), infer_step() or
  // move_to() from then on. What this isolates and what not: see torch_trainer.cpp,
  // apply_thread_limit(). Error(usage) for a negative count.
  virtual void set_threads(int threads) = 0;
  // The intra-op threads LibTorch allowed the last step, inference or move, on its calling thread
  // (0 before the first).
  [[nodiscard]] virtual int intra_op_threads() const = 0;
};

// Linked with LibTorch only (gpucap_torch). Error(usage) for an empty stage list or a bad option,
// Error(invalid_data) for a file that is not TorchScript, stages that do not chain (one stage's
// output is not what the next accepts) or a last stage that is not batch × classes,
// Error(unsupported) for CUDA where there is none.
[[nodiscard]] std::unique_ptr<TorchTrainer> make_torch_trainer(const TorchTrainerOptions& options);

}  // namespace gpucap::engine
