// An example training program that asks gpucap's batch-size optimizer for its batch size:
// run it again and again (as a recurring job would be) and the optimizer learns the batch size
// that reaches the target accuracy at the lowest energy-time cost.
//
//   build-ci/gpucap bso serve --port 8000 &
//   build-ci/examples/bso_train/bso_train --server http://127.0.0.1:8000 --job-prefix mlp
//
// --device cuda trains on the GPU and measures it through NVML (gpucap's NvmlDevice: its energy
// counter, or its power integrated where there is no counter). --device cpu trains on the CPU and
// measures the GPU twin instead: every training step runs one batch of --sim-model on the
// simulated --sim-gpu, in virtual time, so the figures it reports are SIMULATED.

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <memory>
#include <optional>

#include "gpucap/bsoclient/client.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/device/nvml_device.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/sim/sim_device.hpp"
#include "synthetic_task.hpp"

namespace {

using namespace gpucap;

constexpr int kExitTrainFailed = 3;  // the optimizer stopped this batch size: run again

struct Flags {
  std::string server;
  std::string token;
  std::string job_prefix = "bso-train";
  std::string job_id;
  std::string batch_sizes = "16,32,64,128,256";
  int default_batch_size = 64;
  double target_metric = 0.88;
  int max_epochs = 20;
  double eta = 0.5;
  std::optional<std::int64_t> mab_seed;
  std::uint64_t seed = 1;
  double learning_rate = 0.05;
  std::string device = "cpu";
  unsigned gpu_index = 0;
  std::string nvml_lib = device::kDefaultNvmlLibrary;
  std::string data_dir = GPUCAP_DEFAULT_DATA_DIR;
  std::string sim_gpu = "p40";
  std::string sim_model = "resnet50";
  bso_train::TaskShape task;
  bool json = false;
};

// What is measured: the NVML GPU, or the twin standing in for it.
struct Measured {
  std::unique_ptr<device::NvmlLibrary> nvml;
  std::unique_ptr<sim::GpuTwin> twin;
  std::unique_ptr<device::Device> gpu;
  std::unique_ptr<monitor::Monitor> meter;  // the monitor API (monitor/monitor.hpp)
};

Measured open_measured(const Flags& flags) {
  Measured m;
  if (flags.device == "cuda") {
    m.nvml = std::make_unique<device::NvmlLibrary>(flags.nvml_lib);
    // Read-only: the example measures the GPU, it changes nothing on it.
    m.gpu = std::make_unique<device::NvmlDevice>(*m.nvml, flags.gpu_index, /*writes_allowed=*/false);
    m.meter = std::make_unique<monitor::Monitor>(std::vector<device::Device*>{m.gpu.get()},
                                                       monitor::steady_seconds_clock());
    return m;
  }
  const auto catalog = sim::Catalog::load(flags.data_dir);
  m.twin = std::make_unique<sim::GpuTwin>(catalog.gpu(flags.sim_gpu), catalog.model(flags.sim_model),
                                          sim::Precision::fp32, flags.seed);
  m.gpu = std::make_unique<device::SimDevice>(*m.twin, /*writes_permitted=*/false);
  auto* twin = m.twin.get();
  m.meter = std::make_unique<monitor::Monitor>(std::vector<device::Device*>{m.gpu.get()},
                                                     [twin] { return twin->now_s(); });
  return m;
}

bso::JobSpec job_from(const Flags& flags) {
  bso::JobSpec job;
  job.job_id_prefix = flags.job_prefix;
  // Runs with the same flags recur on one job; Zeus's null job_id would make each run a new job.
  job.job_id = flags.job_id.empty() ? flags.job_prefix + "-example" : flags.job_id;
  for (const auto part : split(flags.batch_sizes, ',')) {
    const auto size = parse_integer(part);
    if (!size || *size <= 0 || *size > 1'000'000) {
      throw usage_error(fmt::format("--batch-sizes: '{}' is not a positive whole number", part));
    }
    job.batch_sizes.push_back(static_cast<int>(*size));
  }
  job.default_batch_size = flags.default_batch_size;
  job.target_metric = flags.target_metric;
  job.max_epochs = flags.max_epochs;
  job.eta_knob = flags.eta;
  job.mab_seed = flags.mab_seed;
  return job;
}

void add_flags(CLI::App& app, Flags& flags) {
  app.add_option("--server", flags.server, "URL of the BSO server, e.g. http://127.0.0.1:8000")->required();
  app.add_option("--token", flags.token, "bearer token the server wants (or GPUCAP_BSO_TOKEN)")->envname("GPUCAP_BSO_TOKEN");
  app.add_option("--job-prefix", flags.job_prefix, "job id prefix")->capture_default_str();
  app.add_option("--job-id", flags.job_id, "job id (default: PREFIX-example; one id per recurring job)");
  app.add_option("--batch-sizes", flags.batch_sizes, "batch sizes to choose from")->capture_default_str();
  app.add_option("--default-batch-size", flags.default_batch_size, "the batch size to start from")->capture_default_str();
  app.add_option("--target-metric", flags.target_metric, "validation accuracy to reach")->capture_default_str();
  app.add_option("--max-epochs", flags.max_epochs, "epochs before a run gives up")->capture_default_str();
  app.add_option("--eta", flags.eta, "Zeus's eta: 1 prices energy only, 0 time only")->capture_default_str();
  app.add_option("--mab-seed", flags.mab_seed, "seed of the optimizer's random stream (default: the server's)");
  app.add_option("--seed", flags.seed, "seed of the data, the model and the twin")->capture_default_str();
  app.add_option("--lr", flags.learning_rate, "SGD learning rate")->capture_default_str();
  app.add_option("--device", flags.device, "train on cpu (twin's figures) or cuda (NVML's)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--gpu-index", flags.gpu_index, "NVML index of the GPU (--device cuda)")->capture_default_str();
  app.add_option("--nvml-lib", flags.nvml_lib, "NVML library to load (--device cuda)")->capture_default_str();
  app.add_option("--data-dir", flags.data_dir, "gpucap's data folder (the twin's GPUs and models)")->capture_default_str();
  app.add_option("--sim-gpu", flags.sim_gpu, "GPU the twin simulates (--device cpu)")->capture_default_str();
  app.add_option("--sim-model", flags.sim_model, "model whose batches the twin runs per step (--device cpu)")
      ->capture_default_str();
  app.add_option("--classes", flags.task.classes, "classes of the synthetic task")->capture_default_str()->check(CLI::Range(2, 1000));
  app.add_option("--cluster-spread", flags.task.cluster_spread, "noise around each class centre: how hard the task is")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--json", flags.json, "end with one JSON line summarising the run");
}

struct RunSummary {
  int batch_size = 0;
  int trial_number = 0;
  int epochs = 0;
  double accuracy = 0.0;
  bool reached_target = false;
  bool train_failed = false;
};

RunSummary train(const Flags& flags, Measured& measured, bsoclient::BsoClient& client) {
  const bool simulated = measured.meter->simulated();
  const char* label = simulated ? "  [simulated]" : "";
  torch::manual_seed(flags.seed);
  const auto& shape = flags.task;
  const auto data = bso_train::make_dataset(shape, flags.seed);
  const torch::Device device(flags.device == "cuda" ? torch::kCUDA : torch::kCPU);
  auto model = bso_train::make_model(shape);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(flags.learning_rate));
  auto shuffle = at::detail::createCPUGenerator(flags.seed + 1);

  RunSummary run;
  run.batch_size = client.get_batch_size();
  run.trial_number = client.trial()->trial_number;
  fmt::print("job {}, trial {}: batch size {}\n", client.job().job_id, run.trial_number, run.batch_size);
  // The twin runs a batch of the same size per step; a real GPU is sampled for power where it
  // has no energy counter.
  auto* twin = measured.twin.get();
  auto& meter = *measured.meter;
  const auto after_step = [twin, &meter](int batch) {
    if (twin != nullptr) (void)twin->run_batch(batch);
    meter.sample();
  };
  client.on_train_begin();
  for (int epoch = 1; epoch <= flags.max_epochs; ++epoch) {
    bso_train::train_epoch(model, optimizer, data.train, run.batch_size, shuffle, device, after_step);
    run.accuracy = bso_train::accuracy(model, data.validation, device);
    run.epochs = epoch;
    bool stop = false;
    try {
      stop = client.on_evaluate(run.accuracy);
    } catch (const bsoclient::BsoTrainFailedError& e) {
      fmt::print("epoch {:3d}  accuracy {:.4f}  stopped: {}\n", epoch, run.accuracy, e.what());
      run.train_failed = true;
      return run;
    }
    fmt::print("epoch {:3d}  accuracy {:.4f}  time {:9.2f} s  energy {:11.1f} J{}\n", epoch, run.accuracy,
               client.time_s(), client.energy_j(), label);
    if (stop) break;
  }
  run.reached_target = run.accuracy >= flags.target_metric;
  return run;
}

void print_summary(const Flags& flags, const RunSummary& run, const bsoclient::BsoClient& client) {
  const bool simulated = client.monitor().simulated();
  fmt::print("{} after {} epochs with batch size {}: accuracy {:.4f} (target {}), time {:.2f} s, energy {:.1f} J{}\n",
             run.train_failed ? "stopped by the optimizer" : run.reached_target ? "reached the target" : "gave up",
             run.epochs, run.batch_size, run.accuracy, flags.target_metric, client.time_s(), client.energy_j(),
             simulated ? "  [simulated]" : "");
  if (simulated) {
    fmt::print("time and energy are SIMULATED: the GPU twin ({}, {} batches in virtual time) stood in for the GPU; "
               "the training itself ran on the CPU\n",
               flags.sim_gpu, flags.sim_model);
  }
  if (flags.json) {
    const nlohmann::json j = {{"job_id", client.job().job_id}, {"trial_number", run.trial_number},
                              {"batch_size", run.batch_size},  {"epochs", run.epochs},
                              {"accuracy", run.accuracy},      {"reached_target", run.reached_target},
                              {"train_failed", run.train_failed}, {"time_s", client.time_s()},
                              {"energy_j", client.energy_j()}, {"simulated", simulated}};
    fmt::print("{}\n", j.dump());
  }
}

int run_program(const Flags& flags) {
  if (flags.device == "cuda" && !torch::cuda::is_available()) {
    throw Error(ErrorCode::no_gpu, "--device cuda: this LibTorch has no CUDA or sees no GPU (use --device cpu)");
  }
  torch::set_num_threads(1);  // a small model; and runs repeat exactly
  auto measured = open_measured(flags);
  bsoclient::ClientOptions options;
  options.http.server_url = flags.server;
  options.http.token = flags.token;
  bsoclient::BsoClient client(options, job_from(flags), *measured.meter);
  const auto run = train(flags, measured, client);
  print_summary(flags, run, client);
  return run.train_failed ? kExitTrainFailed : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a small MLP with the batch size gpucap's batch-size optimizer chooses"};
  Flags flags;
  add_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  try {
    return run_program(flags);
  } catch (const gpucap::Error& e) {
    fmt::print(stderr, "bso_train: error: {}\n", e.what());
    return gpucap::exit_code(e.code());
  } catch (const std::exception& e) {
    fmt::print(stderr, "bso_train: error: {}\n", e.what());
    return 1;
  }
}
