// The calibration's input files (`gpucap calibrate`, `gpucap fidelity`): the published curves
// (--published, data/calibration/published.json), the Zeus setup (data/calibration/zeus.json),
// the real-GPU setup (data/calibration/real.json: folders of sweeps) and a sweep in such a folder
// (a trial file of `gpucap tune --platform nvml --out`). Input: one byte picks the file, the rest
// is its content.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz_support.hpp"
#include "gpucap/calibrate/published_source.hpp"
#include "gpucap/calibrate/real_source.hpp"
#include "gpucap/calibrate/zeus_source.hpp"
#include "gpucap/sim/catalog.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace calibrate = gpucap::calibrate;

namespace {

void write(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// DIR/real/shipped/ holds one shipped sweep (for a fuzzed setup); DIR/fuzzed/ one fuzzed sweep
// (for a fixed setup, DIR/fixed.json).
struct RealDir {
  gpucap::fuzz::ScratchFile scratch{"setup.json"};
  std::filesystem::path sweep = scratch.dir() / "fuzzed" / "sweep-resnet50-fp32.json";
  std::filesystem::path fixed_setup = scratch.dir() / "fixed.json";
  RealDir() {
    const auto shipped = std::filesystem::path(GPUCAP_FUZZ_DATA_DIR) / "calibration" / "real" / "2026-11-26-NVIDIA_H200" /
                         "sweep-resnet50-fp32.json";
    write(scratch.dir() / "real" / "shipped" / "sweep-resnet50-fp32.json", read(shipped));
    write(fixed_setup, R"({"folders": [{"path": "fuzzed", "gpu": "h200", "use": "fit"}]})");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto catalog = gpucap::sim::Catalog::load(GPUCAP_FUZZ_DATA_DIR);
  static gpucap::fuzz::ScratchFile file("setup.json");
  static RealDir real;
  gpucap::fuzz::Input input(data, size);
  const unsigned which = input.choice(4);
  const auto content = input.rest();
  switch (which) {
    case 0:
      refusals_only([&] {
        const auto curves = calibrate::load_published_curves(file.write(content), catalog);
        (void)calibrate::published_observations(curves);
        refusals_only([&] { (void)calibrate::published_fit_parameters(curves, catalog); });
      });
      break;
    case 1:
      refusals_only([&] { (void)calibrate::load_zeus_setup(file.write(content), catalog); });
      break;
    case 2:
      refusals_only([&] { (void)calibrate::load_real_sweeps(real.scratch.write(content), catalog); });
      break;
    default:
      write(real.sweep, content);
      refusals_only([&] {
        for (const auto& point : calibrate::load_real_sweeps(real.fixed_setup.string(), catalog)) {
          check(point.throughput_img_s > 0.0 && point.mean_power_w > 0.0 && point.max_power_w >= point.mean_power_w,
                "a sweep point the reader should have refused");
        }
      });
      break;
  }
  return 0;
}
