// Puts back GPU settings that a gpucap which did not exit normally (SIGKILL, a crash, a power
// cut) left changed: the restore journal (device/restore_journal.hpp) says what they were.

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "gpucap/cli/commands.hpp"
#include "gpucap/core/error.hpp"
#include "gpucap/device/nvml_device.hpp"
#include "gpucap/device/restore_journal.hpp"

namespace gpucap::cli {

std::string default_nvml_library() {
  const char* path = std::getenv("GPUCAP_NVML_LIB");
  return path != nullptr && *path != '\0' ? path : device::kDefaultNvmlLibrary;
}

void recover_gpu_settings(const std::string& nvml_library) {
  device::RestoreJournal journal(device::default_journal_path());
  if (!std::filesystem::exists(journal.path())) return;
  try {
    // Settings of a gpucap still running are its own to restore: nothing to do, and no reason to
    // load NVML (a machine without a driver would answer with an error about nothing).
    const auto entries = journal.entries();
    if (std::all_of(entries.begin(), entries.end(),
                    [](const device::JournalEntry& e) { return device::is_running(e.owner); })) {
      return;
    }
    const device::NvmlLibrary nvml(nvml_library);
    std::vector<std::unique_ptr<device::NvmlDevice>> opened;
    const auto find = [&](const std::string& uuid) -> device::Device* {
      for (unsigned i = 0; i < nvml.device_count(); ++i) {
        auto gpu = std::make_unique<device::NvmlDevice>(nvml, i);
        if (gpu->info().uuid != uuid) continue;
        opened.push_back(std::move(gpu));
        return opened.back().get();
      }
      return nullptr;
    };
    const auto report = device::recover_from_journal(journal, find);
    for (const auto& entry : report.restored) {
      const auto info = device::describe(entry.control);
      spdlog::warn("restored {} on GPU {} to {} (left changed by a gpucap that did not exit normally; journal {})",
                   info.name, entry.device_id,
                   entry.original ? fmt::format("{:g} {}", *entry.original, info.unit) : std::string("its default"),
                   journal.path());
    }
    for (const auto& failure : report.failures) spdlog::error("could not restore a GPU setting: {}", failure);
  } catch (const Error& e) {
    spdlog::error("GPU settings recorded in {} could not be restored: {}", journal.path(), e.what());
  }
}

}  // namespace gpucap::cli
