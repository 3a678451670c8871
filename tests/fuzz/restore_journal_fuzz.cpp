// The restore journal (device/restore_journal): the file gpucap reads at every start, as root, to
// put back the GPU settings a killed run left behind. A journal that reads is recovered onto the
// twin's device (device "GPU-fuzz"; any other id is not on this machine), as `gpucap` does at
// start, then one entry recorded and the journal read again. Input: the file.

#include <cstdint>

#include "fuzz_support.hpp"
#include "gpucap/device/restore_journal.hpp"
#include "gpucap/sim/sim_device.hpp"
#include "gpucap/sim/catalog.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::refusals_only;
namespace device = gpucap::device;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto catalog = gpucap::sim::Catalog::load(GPUCAP_FUZZ_DATA_DIR);
  static gpucap::fuzz::ScratchFile file("restore-journal.json");
  const std::string_view content(reinterpret_cast<const char*>(data), size);
  device::RestoreJournal journal(file.write(content));
  refusals_only([&] {
    const auto entries = journal.entries();
    gpucap::sim::GpuTwin twin(catalog.gpu("p40"), catalog.model("resnet_v2_50"), gpucap::sim::Precision::fp32, 1);
    device::SimDevice sim_device(twin);
    const auto report = device::recover_from_journal(journal, [&](const std::string& id) -> device::Device* {
      return id == "GPU-fuzz" ? &sim_device : nullptr;
    });
    check(report.restored.size() <= entries.size(), "more entries restored than the journal holds");
    journal.record("GPU-other", device::Control::power_limit_w, 200.0);
    const auto again = journal.entries();
    check(!again.empty(), "a recorded entry is not in the journal");
  });
  return 0;
}
