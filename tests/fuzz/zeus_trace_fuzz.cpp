// Zeus's NSDI'23 traces, or any trace in their format (`gpucap bso simulate --train-trace
// --power-trace`, `gpucap fidelity --zeus-power-trace`): summary_power_<gpu>.csv alone, or both
// files read into a workload, which `gpucap bso simulate` then runs (a few recurrences).
// Input: one byte of choices; for a workload, summary_train.csv, a line "--", then the power trace.

#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "gpucap/bench/zeus_trace.hpp"
#include "gpucap/bso/simulate.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace bench = gpucap::bench;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gpucap::fuzz::ScratchFile train("summary_train.csv");
  static gpucap::fuzz::ScratchFile power("summary_power_v100.csv");
  gpucap::fuzz::Input input(data, size);
  const std::uint8_t choice = input.byte();
  if ((choice & 0x80U) == 0) {
    refusals_only([&] {
      const auto rows = bench::load_zeus_power_rows(power.write(input.rest()));
      check(!rows.empty(), "a power trace without rows");
      for (const auto& row : rows) {
        check(row.power_limit_w > 0.0 && row.time_per_epoch_s > 0.0 && row.average_power_w > 0.0, "a row that is not positive");
      }
    });
    return 0;
  }
  const auto& train_path = train.write(input.until("\n--\n"));
  const auto& power_path = power.write(input.rest());
  const auto& workloads = bench::zeus_workloads();
  const unsigned pick = choice % 8U;
  std::string name = "custom/net";
  bench::ZeusWorkloadOverrides overrides;
  if (pick < workloads.size()) {
    name = workloads[pick].name;
  } else {
    overrides = {"adam", 0.5, true, 5, 32};
  }
  refusals_only([&] {
    const auto workload = bench::load_zeus_workload(train_path, power_path, name, overrides);
    check(!workload.batch_sizes.empty(), "a workload without batch sizes");
    gpucap::bso::SimOptions options;
    options.recurrences = 3;
    options.max_tries = 5;
    options.optimizer = (choice & 0x40U) != 0 ? gpucap::bso::OptimizerKind::gpucap : gpucap::bso::OptimizerKind::zeus;
    refusals_only([&] { (void)gpucap::bso::simulate(workload, options); });
  });
  return 0;
}
