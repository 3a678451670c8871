#pragma once
// The restore journal: a GPU must never be left throttled or mis-clocked, not even when gpucap is
// killed (SIGKILL, a crash, a power cut). Before the first write of a control, the value the
// control had is recorded in a small JSON file, durably (temporary file, fsync, rename, fsync of
// the folder), so the write cannot happen unless the record exists. A normal exit restores the
// settings and forgets them; otherwise the next gpucap start finds the journal and puts every
// recorded control back (recover_from_journal) before doing anything else.
//
// Where it lives (default_journal_path): $GPUCAP_RESTORE_JOURNAL if set; else, for root,
// /var/lib/gpucap/restore-journal.json; else $XDG_STATE_HOME/gpucap/restore-journal.json
// ($XDG_STATE_HOME defaults to ~/.local/state). Processes sharing it take an exclusive lock
// (flock on PATH.lock) around each change.

#include <functional>
#include <string>
#include <vector>

#include "gpucap/device/device.hpp"

namespace gpucap::device {

// The process that changed a setting: its pid and its start time (clock ticks after boot, from
// /proc/PID/stat), so that a pid reused by another process is not taken for it.
struct ProcessId {
  long pid = 0;
  unsigned long long start_ticks = 0;

  bool operator==(const ProcessId&) const = default;
};

[[nodiscard]] ProcessId this_process();
// Whether that process is still running.
[[nodiscard]] bool is_running(const ProcessId& process);

struct JournalEntry {
  std::string device_id;  // the GPU's UUID
  Control control = Control::sm_clock_lock_mhz;
  ControlValue original;  // nullopt: unlocked / the board default
  ProcessId owner;        // who changed it

  bool operator==(const JournalEntry&) const = default;
};

[[nodiscard]] std::string default_journal_path();

class RestoreJournal {
 public:
  explicit RestoreJournal(std::string path);
  [[nodiscard]] const std::string& path() const { return path_; }

  // Records the original value of a control, owned by this process, unless one is recorded for it
  // already (the first is the one to restore); durable before it returns. Error(io) when it cannot
  // be written.
  void record(const std::string& device_id, Control control, ControlValue original);
  // Forgets the device's entries (except those of other running processes); removes the file once
  // none are left.
  void forget(const std::string& device_id);
  // Every entry; none when the file does not exist. Error(invalid_data) for a damaged journal.
  [[nodiscard]] std::vector<JournalEntry> entries() const;

 private:
  std::string path_;
};

// Opens a device by its id, or returns nullptr when this machine has no such device.
using DeviceFinder = std::function<Device*(const std::string& device_id)>;

struct RecoveryReport {
  std::vector<JournalEntry> restored;
  std::vector<std::string> failures;  // one line each; those entries stay in the journal
};

// Puts back every journaled control whose owner is no longer running, device by device; a device
// whose controls were all restored is forgotten. A running owner's entries are left alone: that
// run is still using its settings and restores them itself. Devices `find` does not know stay in
// the journal (and in failures).
[[nodiscard]] RecoveryReport recover_from_journal(RestoreJournal& journal, const DeviceFinder& find);

}  // namespace gpucap::device
