// The restore journal (device/restore_journal): the file gpucap reads at every start, as root, to
// put back the GPU settings a killed run left behind. A journal that reads is recovered onto the
// twin's device (device "GPU-fuzz"; any other id is not on this machine), as `gpucap` does at
// start, then one entry recorded and the journal read again. Input: the file.

#include <cstdint>

#include <nlohmann/json.hpp>

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
    // What was read is what the file says (no number silently wrapped or cut: a pid of 1e300 is
    // not some other process's).
    const auto json = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
    check(json.is_object() && json.at("version") == 1, "a journal of another version was read");
    std::size_t i = 0;
    for (const auto& listed : json.at("entries")) {
      check(i < entries.size() && listed.at("pid") == entries[i].owner.pid &&
                listed.at("pid_start_ticks") == entries[i].owner.start_ticks &&
                (listed.at("original").is_null() ? !entries[i].original.has_value() : listed.at("original") == *entries[i].original),
            "an entry was read with other numbers than the journal's");
      ++i;
    }
    check(i == entries.size(), "another number of entries than the journal's");
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
