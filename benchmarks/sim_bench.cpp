// Simulator speed: simulated batches per wall second, and one whole 20,000-image job.

#include <benchmark/benchmark.h>

#include "gpucap/runtime/sim_job.hpp"
#include "gpucap/sim/catalog.hpp"

namespace {

const gpucap::sim::Catalog& catalog() {
  static const auto instance = gpucap::sim::Catalog::load(GPUCAP_BENCH_DATA_DIR);
  return instance;
}

void BM_TwinBatch(benchmark::State& state) {
  const auto& model = catalog().model("resnet_v2_50");
  gpucap::sim::GpuTwin twin(catalog().gpu("p40"), model, model.precision, 1);
  const int batch = static_cast<int>(state.range(0));
  for (auto _ : state) {
    auto record = twin.run_batch(batch);
    benchmark::DoNotOptimize(record);
    (void)twin.sensor().take_readings();  // the meter drains the sensor like this after every batch
  }
  state.counters["batches_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TwinBatch)->Arg(1)->Arg(32)->Arg(255);

// A full job as `gpucap run` does it: 20,000 Caltech images, batchdvfs, power sampled at 100 Hz.
void BM_Job20000Images(benchmark::State& state) {
  gpucap::runtime::SimJobSpec spec;
  spec.gpu = "p40";
  spec.model = "inception_v4";
  spec.dataset = "caltech256";
  spec.algorithm = "batchdvfs";
  spec.schedule = gpucap::CapSchedule::constant(84);
  for (auto _ : state) {
    gpucap::runtime::SimJob job(catalog(), spec);
    auto summary = job.run();
    benchmark::DoNotOptimize(summary);
  }
}
BENCHMARK(BM_Job20000Images)->Unit(benchmark::kMillisecond);

}  // namespace
