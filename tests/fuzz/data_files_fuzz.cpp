// The twin's data files, which users write for their own GPUs and models (--data-dir) and pass as
// matrices (--matrix FILE.json): GPU, model and dataset specs (sim/catalog), the task, serving
// and cluster matrices (bench), and SwitchFlow's device/model/calibration files of `gpucap share`
// (data/sched, sim/share_twin). Input: one byte picks the file, the rest is its content. A spec
// that loads must also make a catalogue with the shipped specs.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_support.hpp"
#include "gpucap/bench/cluster_matrix.hpp"
#include "gpucap/bench/matrix.hpp"
#include "gpucap/bench/serve_bench.hpp"
#include "gpucap/core/json_file.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/sim/share_twin.hpp"

using gpucap::fuzz::refusals_only;
namespace sim = gpucap::sim;

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A copy of data/sched in a scratch data directory, one of whose files the input replaces.
struct ShareData {
  gpucap::fuzz::ScratchFile scratch{"unused"};
  std::filesystem::path sched = scratch.dir() / "sched";
  const char* names[3] = {"calibration.json", "models.json", "devices.json"};
  std::string originals[3];
  ShareData() {
    std::filesystem::create_directories(sched);
    for (int i = 0; i < 3; ++i) {
      originals[i] = read_file(std::filesystem::path(GPUCAP_FUZZ_DATA_DIR) / "sched" / names[i]);
      write(i, originals[i]);
    }
  }
  void write(int i, std::string_view content) const {
    std::ofstream out(sched / names[i], std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  }
};

const sim::Catalog& shipped() {
  static const sim::Catalog catalog = sim::Catalog::load(GPUCAP_FUZZ_DATA_DIR);
  return catalog;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gpucap::fuzz::ScratchFile file("spec.json");
  static ShareData share;
  gpucap::fuzz::Input input(data, size);
  const unsigned which = input.choice(10);
  const auto content = input.rest();
  const auto& catalog = shipped();
  switch (which) {
    case 0:
      refusals_only([&] {
        auto gpu = sim::load_gpu_spec(file.write(content));
        gpu.id = "fuzzed-gpu";
        gpu.aliases.clear();
        auto gpus = catalog.gpus();
        gpus.push_back(std::move(gpu));
        (void)sim::Catalog::of(catalog.data_dir(), std::move(gpus), catalog.models(), catalog.datasets());
      });
      break;
    case 1:
      refusals_only([&] {
        auto model = sim::load_model_spec(file.write(content));
        model.id = "fuzzed-model";
        model.aliases.clear();
        auto models = catalog.models();
        models.push_back(std::move(model));
        (void)sim::Catalog::of(catalog.data_dir(), catalog.gpus(), std::move(models), catalog.datasets());
      });
      break;
    case 2:
      refusals_only([&] {
        auto dataset = sim::load_dataset_spec(file.write(content));
        dataset.id = "fuzzed-dataset";
        dataset.aliases.clear();
        auto datasets = catalog.datasets();
        datasets.push_back(std::move(dataset));
        (void)sim::Catalog::of(catalog.data_dir(), catalog.gpus(), catalog.models(), std::move(datasets));
      });
      break;
    case 3:
      refusals_only([&] { (void)gpucap::bench::load_matrix(file.write(content)); });
      break;
    case 4:
      refusals_only([&] { (void)gpucap::bench::load_serve_matrix(file.write(content)); });
      break;
    case 5:
      refusals_only([&] { (void)gpucap::bench::load_cluster_matrix(file.write(content)); });
      break;
    case 6:
    case 7:
    case 8: {
      const int i = static_cast<int>(which) - 6;
      share.write(i, content);
      refusals_only([&] { (void)sim::ShareTwin(share.scratch.dir().string(), 1); });
      share.write(i, share.originals[i]);
      break;
    }
    default:
      // Any JSON data file: the reader every loader starts with (comments allowed).
      refusals_only([&] { (void)gpucap::load_json_file(file.write(content)); });
      break;
  }
  return 0;
}
