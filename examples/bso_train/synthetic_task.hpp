#pragma once
// The example's training task: a seeded, synthetic classification problem (Gaussian clusters,
// some overlapping, so accuracy rises over epochs and stops short of 1) and a small MLP trained
// with plain SGD at a fixed learning rate — so a larger batch runs an epoch in fewer steps but
// needs more epochs to reach the target: the trade-off the batch-size optimizer prices.
// Generated in the program; nothing is downloaded.

#include <torch/torch.h>

#include <cstdint>
#include <functional>

namespace bso_train {

struct Split {
  torch::Tensor features;  // N × dims, float
  torch::Tensor labels;    // N, int64
};

struct Dataset {
  Split train;
  Split validation;
};

struct TaskShape {
  int classes = 8;
  int dims = 16;
  int train_size = 2048;
  int validation_size = 1024;
  double cluster_spread = 1.2;  // noise around each class centre (overlap: the accuracy ceiling)
};

[[nodiscard]] inline Split draw_split(const torch::Tensor& centres, int size, double spread, torch::Generator& gen) {
  const auto classes = centres.size(0);
  auto labels = torch::randint(classes, {size}, gen, torch::kInt64);
  auto features = centres.index_select(0, labels) + spread * torch::randn({size, centres.size(1)}, gen);
  return {features, labels};
}

[[nodiscard]] inline Dataset make_dataset(const TaskShape& shape, std::uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  const auto centres = torch::randn({shape.classes, shape.dims}, gen);
  Dataset data;
  data.train = draw_split(centres, shape.train_size, shape.cluster_spread, gen);
  data.validation = draw_split(centres, shape.validation_size, shape.cluster_spread, gen);
  return data;
}

[[nodiscard]] inline torch::nn::Sequential make_model(const TaskShape& shape) {
  return torch::nn::Sequential(torch::nn::Linear(shape.dims, 64), torch::nn::ReLU(), torch::nn::Linear(64, 64),
                               torch::nn::ReLU(), torch::nn::Linear(64, shape.classes));
}

// One pass over the training split in shuffled batches; `after_step(batch)` runs after each
// optimiser step (the example advances the GPU twin there, or samples power).
inline void train_epoch(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer, const Split& train,
                        int batch_size, torch::Generator& gen, torch::Device device,
                        const std::function<void(int)>& after_step) {
  model->train();
  const auto n = train.features.size(0);
  const auto order = torch::randperm(n, gen, torch::kInt64);
  for (std::int64_t start = 0; start < n; start += batch_size) {
    const auto index = order.slice(0, start, std::min<std::int64_t>(start + batch_size, n));
    const auto x = train.features.index_select(0, index).to(device);
    const auto y = train.labels.index_select(0, index).to(device);
    optimizer.zero_grad();
    const auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    optimizer.step();
    after_step(static_cast<int>(index.size(0)));
  }
}

[[nodiscard]] inline double accuracy(torch::nn::Sequential& model, const Split& split, torch::Device device) {
  torch::NoGradGuard no_grad;
  model->eval();
  const auto predicted = model->forward(split.features.to(device)).argmax(1).cpu();
  return predicted.eq(split.labels).to(torch::kFloat64).mean().item<double>();
}

}  // namespace bso_train
