// The Tesla P40 controller logs published with BatchDVFS (`gpucap replay --trace F --algorithm
// batchdvfs|clipper|dvfs`, and the calibration's P40 runs) and the 1-Hz nvidia-smi logs beside
// them. A log that reads is replayed through gpucap's controller, as `gpucap replay` does.
// Input: one byte picks the kind (batchdvfs, clipper, dvfs, nvidia-smi), the rest is the file.

#include <cstdint>

#include "fuzz_support.hpp"
#include "gpucap/bench/p40_log.hpp"
#include "gpucap/bench/replay.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace bench = gpucap::bench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gpucap::fuzz::ScratchFile file("log.csv");
  gpucap::fuzz::Input input(data, size);
  const unsigned which = input.choice(4);
  const auto& path = file.write(input.rest());
  if (which == 3) {
    refusals_only([&] {
      const auto samples = bench::read_nvidia_smi_log(path);
      check(!samples.empty(), "an nvidia-smi log without samples");
      for (std::size_t i = 1; i < samples.size(); ++i) check(samples[i].time_s >= samples[i - 1].time_s, "smi time goes back");
    });
    return 0;
  }
  const auto kind = which == 0 ? bench::P40LogKind::batchdvfs : which == 1 ? bench::P40LogKind::clipper : bench::P40LogKind::dvfs;
  refusals_only([&] {
    const auto log = bench::read_p40_log(path, kind);
    check(!log.rows.empty(), "a log without rows");
    refusals_only([&] {
      const auto result = bench::replay_p40_log(log, bench::ReplayOptions{});
      check(result.matched <= result.steps.size(), "more matches than steps");
      (void)bench::replay_csv(result);
      (void)bench::replay_json(result).dump();
    });
  });
  return 0;
}
