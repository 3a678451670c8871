// The LibTorch trainer on the CPU: SwitchFlow's preemption of a training job between stages, the
// redone step, and migration of its state away and back. Models come from the CTest fixture
// export_torch_train_models (scripts/export_models.py --train [--stages 3]): tiny_cnn (3
// convolutions with batch norm, 10 classes) and resnet18, both trained at 32 × 32.
//
// Every trainer here runs its CPU work on one intra-op thread (threads = 1): a parallel reduction
// splits its sum by thread count, so bitwise equality holds between runs at the same count; one
// thread is also what keeps these tests fast and steady on a shared machine. `deterministic`
// (process-wide LibTorch flags) is set as a CUDA run would need; the CPU kernels here do not.

#include "gpucap/engine/torch_trainer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "gpucap/core/error.hpp"
#include "gpucap/engine/torch_plugin.hpp"
#include "support/expect_error.hpp"
#include "support/paths.hpp"

namespace gpucap::engine {
namespace {

using test::expect_error_from;

std::string model_file(const std::string& name) { return std::string(GPUCAP_TEST_TRAIN_MODELS_DIR) + "/" + name; }

// The files of `model` exported with --train --stages `count`, in order.
std::vector<std::string> stage_files(const std::string& model, int count) {
  std::vector<std::string> files;
  for (int k = 1; k <= count; ++k) {
    files.push_back(model_file(model + ".train.stage" + std::to_string(k) + "of" + std::to_string(count) + ".pt"));
  }
  return files;
}

TorchTrainerOptions options_for(const std::string& model, int batch = 8) {
  TorchTrainerOptions options;
  options.stage_files = stage_files(model, 3);
  options.input_size = 32;
  options.batch_size = batch;
  options.threads = 1;
  options.deterministic = true;
  return options;
}

// Asks to yield at preemption point `point` (0: before the first stage) of the step it is given to.
YieldCheck yield_at(int point) {
  auto asked = std::make_shared<int>(0);
  return [asked, point] { return (*asked)++ == point; };
}

void expect_same_state(const std::vector<StateTensor>& actual, const std::vector<StateTensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].name, expected[i].name);
    EXPECT_EQ(actual[i].dtype, expected[i].dtype) << actual[i].name;
    EXPECT_EQ(actual[i].shape, expected[i].shape) << actual[i].name;
    EXPECT_TRUE(actual[i].bytes == expected[i].bytes) << actual[i].name << " differs";
  }
}

std::vector<float> floats(const StateTensor& tensor) {
  std::vector<float> values(tensor.bytes.size() / sizeof(float));
  std::memcpy(values.data(), tensor.bytes.data(), values.size() * sizeof(float));
  return values;
}

bool any_nonzero(const StateTensor& tensor) {
  const auto values = floats(tensor);
  return std::any_of(values.begin(), values.end(), [](float v) { return v != 0.0f; });
}

// Parameters, then buffers, then momentum buffers, each in model order (state() lists them stage
// by stage).
std::vector<StateTensor> by_kind(const std::vector<StateTensor>& state) {
  const auto kind = [](const StateTensor& t) {
    if (t.name.rfind("momentum/", 0) == 0) return 2;
    return t.name.find("running_") != std::string::npos || t.name.find("num_batches_tracked") != std::string::npos ? 1 : 0;
  };
  auto sorted = state;
  std::stable_sort(sorted.begin(), sorted.end(), [&](const auto& x, const auto& y) { return kind(x) < kind(y); });
  return sorted;
}

TEST(TorchTrainer, StagesChainAndTrainAsTheWholeModel) {
  const auto staged = make_torch_trainer(options_for("tiny_cnn"));
  EXPECT_EQ(staged->stage_count(), 3);
  EXPECT_EQ(staged->preemption_points(), 7);
  EXPECT_EQ(staged->classes(), 10);
  EXPECT_EQ(staged->device(), "cpu");
  EXPECT_TRUE(std::isnan(staged->last_loss()));
  auto whole_options = options_for("tiny_cnn");
  whole_options.stage_files = {model_file("tiny_cnn.train.pt")};
  const auto whole = make_torch_trainer(whole_options);
  EXPECT_EQ(whole->stage_count(), 1);
  const auto initial = staged->state();
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(staged->step());
    ASSERT_TRUE(whole->step());
    // Random labels: the loss starts near ln(10) and stays finite.
    EXPECT_TRUE(std::isfinite(staged->last_loss()));
    EXPECT_NEAR(staged->last_loss(), whole->last_loss(), 1e-5 * std::abs(whole->last_loss())) << "step " << s;
  }
  EXPECT_NEAR(staged->last_loss(), std::log(10.0), 1.0);
  EXPECT_EQ(staged->steps_done(), 3);
  // The same tensors of each kind in the same order, whatever their names in the stages: the
  // stage-by-stage backward gives the whole model's gradients.
  const auto a = by_kind(staged->state());
  const auto b = by_kind(whole->state());
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape, b[i].shape) << a[i].name << " / " << b[i].name;
    if (a[i].dtype != "Float") continue;
    const auto x = floats(a[i]);
    const auto y = floats(b[i]);
    for (std::size_t j = 0; j < x.size(); ++j) {
      ASSERT_NEAR(x[j], y[j], 1e-5 + 1e-4 * std::abs(y[j])) << a[i].name << "[" << j << "]";
    }
  }
  // Training moved every weight.
  const auto start = by_kind(initial);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].name.find("weight") != std::string::npos && a[i].name.rfind("momentum/", 0) != 0) {
      EXPECT_NE(a[i].bytes, start[i].bytes) << a[i].name << " did not change";
    }
  }
}

TEST(TorchTrainer, PreemptionAtAnyPointAbandonsTheStepAndChangesNothing) {
  const auto trainer = make_torch_trainer(options_for("tiny_cnn"));
  ASSERT_TRUE(trainer->step());
  ASSERT_TRUE(trainer->step());  // momentum is non-zero now: an update would show everywhere
  const auto before = trainer->state();
  const auto loss = trainer->last_loss();
  for (int point = 0; point < trainer->preemption_points(); ++point) {
    EXPECT_FALSE(trainer->step(yield_at(point))) << "point " << point;
    EXPECT_EQ(trainer->steps_done(), 2);
    EXPECT_EQ(trainer->last_loss(), loss);
    expect_same_state(trainer->state(), before);  // parameters, batch-norm statistics, momentum
  }
  std::atomic<bool> preempt{true};
  EXPECT_FALSE(trainer->step(preempt));
  preempt = false;
  // The redone step is the step an uninterrupted job takes.
  ASSERT_TRUE(trainer->step(preempt));
  const auto reference = make_torch_trainer(options_for("tiny_cnn"));
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(reference->step());
  EXPECT_EQ(trainer->steps_done(), 3);
  EXPECT_EQ(trainer->last_loss(), reference->last_loss());
  expect_same_state(trainer->state(), reference->state());
}

// SwitchFlow's life of a low-priority job: preempted in the middle of a step, moved to the other
// device where it redoes the step and goes on, moved back when the high-priority job ends — three
// round trips, preempted at different stages, once twice in one step, once without moving.
class ExactWeights : public ::testing::TestWithParam<std::string> {};

TEST_P(ExactWeights, PreemptedAndMigratedJobEndsBitwiseEqualToAnUninterruptedOne) {
  const auto options = options_for(GetParam(), 4);
  constexpr int kSteps = 8;
  const auto reference = make_torch_trainer(options);
  std::vector<double> losses;
  for (int s = 0; s < kSteps; ++s) {
    ASSERT_TRUE(reference->step());
    losses.push_back(reference->last_loss());
  }

  const auto job = make_torch_trainer(options);
  const int n = job->stage_count();
  int moves = 0;
  auto move = [&] {
    const auto transfer = job->move_to("cpu");
    EXPECT_EQ(transfer.bytes, job->state_bytes());
    ++moves;
  };
  // step → the preemption points it is interrupted at, in turn; then whether the job moves away.
  const std::map<int, std::vector<int>> preemptions = {{1, {1}}, {3, {n + 1}}, {5, {2 * n, n}}, {7, {0}}};
  const std::map<int, bool> moves_away = {{1, true}, {3, true}, {5, true}, {7, false}};
  const std::map<int, bool> moves_back_after = {{2, true}, {3, true}, {6, true}};
  for (int s = 0; s < kSteps; ++s) {
    if (const auto it = preemptions.find(s); it != preemptions.end()) {
      for (const int point : it->second) ASSERT_FALSE(job->step(yield_at(point))) << "step " << s << " point " << point;
      if (moves_away.at(s)) move();
    }
    ASSERT_TRUE(job->step()) << "step " << s;  // the redone step on the other device, or the next one
    EXPECT_EQ(job->last_loss(), losses[static_cast<std::size_t>(s)]) << "step " << s;
    if (moves_back_after.count(s) != 0) move();
  }
  EXPECT_EQ(moves, 6);
  EXPECT_EQ(job->steps_done(), kSteps);
  EXPECT_EQ(job->last_loss(), reference->last_loss());
  const auto state = job->state();
  expect_same_state(state, reference->state());
  // The comparison has teeth: momentum and batch-norm statistics are live state, so a migration
  // that dropped or reset either, or a redone step that updated them twice, would differ.
  const auto live = [&](const std::string& fragment) {
    return std::count_if(state.begin(), state.end(), [&](const StateTensor& t) {
      return t.name.find(fragment) != std::string::npos && any_nonzero(t);
    });
  };
  EXPECT_GT(live("momentum/"), 0);
  EXPECT_GT(live("running_mean"), 0);
}

INSTANTIATE_TEST_SUITE_P(Cpu, ExactWeights, ::testing::Values("tiny_cnn", "resnet18"));

TEST(TorchTrainer, MoveToCopiesEveryTensorAndReportsBytesAndCount) {
  const auto trainer = make_torch_trainer(options_for("tiny_cnn"));
  ASSERT_TRUE(trainer->step());
  const auto before = trainer->state();
  std::int64_t bytes = 0;
  for (const auto& t : before) bytes += static_cast<std::int64_t>(t.bytes.size());
  // tiny_cnn: 6 418 parameters in 11 tensors (convolutions 216 + 1 152 + 4 608, batch-norm scales
  // and shifts 2 × (8 + 16 + 32), linear 320 + 10), as many momentum values, and 3 batch norms'
  // running mean and variance (2 × 56 floats) and counters (3 int64): 31 tensors.
  constexpr std::int64_t kTinyCnnBytes = (2 * 6418 + 2 * 56) * 4 + 3 * 8;
  EXPECT_EQ(bytes, kTinyCnnBytes);
  EXPECT_EQ(trainer->state_bytes(), kTinyCnnBytes);
  EXPECT_EQ(trainer->variable_count(), 31);

  const auto transfer = trainer->move_to("cpu");
  EXPECT_EQ(transfer.bytes, kTinyCnnBytes);
  EXPECT_EQ(transfer.variables, 31);
  EXPECT_GT(transfer.seconds, 0.0);
  const auto after = trainer->state();
  expect_same_state(after, before);
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_NE(after[i].data_address, before[i].data_address) << after[i].name << ": not copied";
  }
  // The unstaged export holds the same state.
  auto whole = options_for("tiny_cnn");
  whole.stage_files = {model_file("tiny_cnn.train.pt")};
  const auto unstaged = make_torch_trainer(whole);
  EXPECT_EQ(unstaged->state_bytes(), kTinyCnnBytes);
  EXPECT_EQ(unstaged->variable_count(), 31);
}

TEST(TorchTrainer, InferenceStepsYieldBetweenStagesAndChangeNothing) {
  const auto trainer = make_torch_trainer(options_for("tiny_cnn"));
  ASSERT_TRUE(trainer->step());
  const auto before = trainer->state();
  EXPECT_TRUE(trainer->infer_step());
  EXPECT_FALSE(trainer->infer_step(yield_at(2)));
  EXPECT_EQ(trainer->inferences_done(), 1);
  EXPECT_EQ(trainer->steps_done(), 1);
  expect_same_state(trainer->state(), before);
  // Training goes on in training mode: as a job that never ran an inference.
  ASSERT_TRUE(trainer->step());
  const auto reference = make_torch_trainer(options_for("tiny_cnn"));
  ASSERT_TRUE(reference->step());
  ASSERT_TRUE(reference->step());
  expect_same_state(trainer->state(), reference->state());
}

// The thread that runs a job's work gets the job's cap; another thread keeps LibTorch's default.
TEST(TorchTrainer, ThreadLimitIsPerThreadAndRevertible) {
  auto options = options_for("tiny_cnn");
  options.threads = 0;
  const auto unrestricted = make_torch_trainer(options);
  const auto restricted = make_torch_trainer(options);
  std::thread([&] { ASSERT_TRUE(unrestricted->step()); }).join();
  const int default_threads = unrestricted->intra_op_threads();
  ASSERT_GE(default_threads, 1);
  const int cap = default_threads + 1;  // differs from the default whatever the machine
  restricted->set_threads(cap);
  std::thread([&] {
    ASSERT_TRUE(restricted->step());
    EXPECT_EQ(restricted->intra_op_threads(), cap);
    restricted->set_threads(0);  // the same thread, back to the default
    ASSERT_TRUE(restricted->infer_step());
    EXPECT_EQ(restricted->intra_op_threads(), default_threads);
    restricted->set_threads(cap);
    (void)restricted->move_to("cpu");
    EXPECT_EQ(restricted->intra_op_threads(), cap);
  }).join();
  // A thread started after the cap was set does not inherit it (at::set_num_threads would leak it).
  std::thread([&] { ASSERT_TRUE(unrestricted->step()); }).join();
  EXPECT_EQ(unrestricted->intra_op_threads(), default_threads);
  expect_error_from([&] { restricted->set_threads(-1); }, ErrorCode::usage, "threads -1");
}

TEST(TorchTrainer, BadInputIsOneClearError) {
  const test::TempDir dir;
  auto options = options_for("tiny_cnn");
  const auto make = [&] { (void)make_torch_trainer(options); };

  options.stage_files = {dir.file("missing.pt")};
  expect_error_from(make, ErrorCode::invalid_data, "missing.pt: not a TorchScript");
  options.stage_files = {dir.write("junk.pt", "this is not a model")};
  expect_error_from(make, ErrorCode::invalid_data, "junk.pt: not a TorchScript");
  options.stage_files = {};
  expect_error_from(make, ErrorCode::usage, "needs its model");
  // Stages that do not chain: from another model, out of order, or one missing at the end.
  options.stage_files = {stage_files("tiny_cnn", 3)[0], stage_files("resnet18", 3)[1]};
  expect_error_from(make, ErrorCode::invalid_data,
                    "resnet18.train.stage2of3.pt (stage 2 of 2) does not take the output of stage 1");
  const auto tiny = stage_files("tiny_cnn", 3);
  options.stage_files = {tiny[1], tiny[0], tiny[2]};
  expect_error_from(make, ErrorCode::invalid_data, "(stage 1 of 3) does not take a 1×3×32×32 image");
  options.stage_files = {tiny[0], tiny[1]};
  expect_error_from(make, ErrorCode::invalid_data, "not batch × classes");

  // One bad option at a time.
  const std::vector<std::tuple<std::function<void(TorchTrainerOptions&)>, ErrorCode, std::string>> bad_options = {
      {[](auto& o) { o.device = "tpu"; }, ErrorCode::usage, "device 'tpu' is not cpu, cuda or cuda:N"},
      {[](auto& o) { o.device = "cuda:0"; }, ErrorCode::unsupported, "device cuda:0: this LibTorch has no CUDA"},
      {[](auto& o) { o.batch_size = 0; }, ErrorCode::usage, "batch size 0"},
      {[](auto& o) { o.input_size = 4; }, ErrorCode::usage, "input size 4"},
      {[](auto& o) { o.learning_rate = 0.0; }, ErrorCode::usage, "learning rate 0"},
      {[](auto& o) { o.momentum = 1.0; }, ErrorCode::usage, "momentum 1"},
      {[](auto& o) { o.threads = -2; }, ErrorCode::usage, "threads -2"},
  };
  for (const auto& [spoil, code, fragment] : bad_options) {
    options = options_for("tiny_cnn");
    spoil(options);
    expect_error_from(make, code, fragment);
  }

  // A failed move leaves the job where it was, and working.
  const auto trainer = make_torch_trainer(options_for("tiny_cnn"));
  ASSERT_TRUE(trainer->step());
  const auto before = trainer->state();
  expect_error_from([&] { (void)trainer->move_to("tpu"); }, ErrorCode::usage, "device 'tpu'");
  expect_error_from([&] { (void)trainer->move_to("cuda"); }, ErrorCode::unsupported, "no CUDA");
  EXPECT_EQ(trainer->device(), "cpu");
  expect_same_state(trainer->state(), before);
  EXPECT_TRUE(trainer->step());
}

// The gpucap binary reaches the trainer through the engine plugin (dlopen), as it does the engine.
TEST(TorchTrainer, LoadsThroughThePlugin) {
  ASSERT_EQ(setenv("GPUCAP_TORCH_ENGINE", GPUCAP_TORCH_PLUGIN_PATH, 1), 0);
  const auto trainer = load_torch_trainer(options_for("tiny_cnn"));
  EXPECT_NE(trainer->name().find("3 stages, cpu"), std::string::npos) << trainer->name();
  EXPECT_FALSE(trainer->step(yield_at(3)));
  ASSERT_TRUE(trainer->step());
  const auto reference = make_torch_trainer(options_for("tiny_cnn"));
  ASSERT_TRUE(reference->step());
  expect_same_state(trainer->state(), reference->state());
  // Errors cross the plugin boundary with their code: from the factory, and from the trainer.
  auto options = options_for("tiny_cnn");
  options.stage_files = {model_file("missing.pt")};
  expect_error_from([&] { (void)load_torch_trainer(options); }, ErrorCode::invalid_data, "missing.pt: not a TorchScript");
  expect_error_from([&] { (void)trainer->move_to("tpu"); }, ErrorCode::usage, "device 'tpu'");
}

}  // namespace
}  // namespace gpucap::engine
