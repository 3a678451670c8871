#include "gpucap/device/restore_journal.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"

namespace gpucap::device {

namespace {

constexpr int kJournalVersion = 1;

std::string control_key(Control control) { return std::string(describe(control).name); }

Control control_of(const std::string& key, const std::string& path) {
  for (const auto control : all_controls()) {
    if (control_key(control) == key) return control;
  }
  throw Error(ErrorCode::invalid_data, fmt::format("{}: unknown control '{}' in the restore journal", path, key));
}

// A whole number of the journal: nlohmann's get<int>() of 1e30 would be undefined behaviour.
long long whole_number(const nlohmann::json& value, const char* what, const std::string& path) {
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() && value.get<unsigned long long>() > static_cast<unsigned long long>(LLONG_MAX))) {
    throw Error(ErrorCode::invalid_data,
                fmt::format("{}: damaged restore journal: {} {} is not a whole number", path, what, value.dump()));
  }
  return value.get<long long>();
}

std::vector<JournalEntry> parse(const std::string& text, const std::string& path) {
  std::vector<JournalEntry> entries;
  try {
    const auto json = nlohmann::json::parse(text);
    if (whole_number(json.at("version"), "version", path) != kJournalVersion) {
      throw Error(ErrorCode::invalid_data, fmt::format("{}: restore journal version {} is not {}", path,
                                                       json.at("version").dump(), kJournalVersion));
    }
    for (const auto& e : json.at("entries")) {
      JournalEntry entry;
      entry.device_id = e.at("device").get<std::string>();
      entry.control = control_of(e.at("control").get<std::string>(), path);
      if (!e.at("original").is_null()) entry.original = e.at("original").get<double>();
      entry.owner.pid = static_cast<long>(whole_number(e.at("pid"), "pid", path));
      const auto ticks = whole_number(e.at("pid_start_ticks"), "pid_start_ticks", path);
      if (ticks < 0) {
        throw Error(ErrorCode::invalid_data, fmt::format("{}: damaged restore journal: pid_start_ticks {} is negative", path, ticks));
      }
      entry.owner.start_ticks = static_cast<unsigned long long>(ticks);
      entries.push_back(std::move(entry));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::invalid_data, fmt::format("{}: damaged restore journal: {}", path, e.what()));
  }
  return entries;
}

std::string serialise(const std::vector<JournalEntry>& entries) {
  auto list = nlohmann::json::array();
  for (const auto& e : entries) {
    list.push_back({{"device", e.device_id},
                    {"control", control_key(e.control)},
                    {"original", e.original ? nlohmann::json(*e.original) : nlohmann::json()},
                    {"pid", e.owner.pid},
                    {"pid_start_ticks", e.owner.start_ticks}});
  }
  return nlohmann::json{{"version", kJournalVersion}, {"entries", list}}.dump(2) + "\n";
}

// An exclusive lock on PATH.lock for the life of the object.
class JournalLock {
 public:
  explicit JournalLock(const std::string& path) {
    const auto lock = path + ".lock";
    fd_ = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(ErrorCode::io, fmt::format("{}: cannot open ({})", lock, std::strerror(errno)));
    while (flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        const int saved = errno;
        close(fd_);
        throw Error(ErrorCode::io, fmt::format("{}: cannot lock ({})", lock, std::strerror(saved)));
      }
    }
  }
  ~JournalLock() { close(fd_); }
  JournalLock(const JournalLock&) = delete;
  JournalLock& operator=(const JournalLock&) = delete;

 private:
  int fd_ = -1;
};

std::vector<JournalEntry> read_entries(const std::string& path) {
  if (!std::filesystem::exists(path)) return {};
  return parse(read_text_file(path), path);
}

// Field 22 of /proc/PID/stat (starttime); nullopt when there is no such process.
std::optional<unsigned long long> start_ticks_of(long pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!in || !std::getline(in, stat)) return std::nullopt;
  const auto after_name = stat.rfind(')');  // the name may hold spaces and parentheses
  if (after_name == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(after_name + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::stoull(field);
  }
  return std::nullopt;
}

}  // namespace

ProcessId this_process() {
  const long pid = static_cast<long>(getpid());
  return ProcessId{pid, start_ticks_of(pid).value_or(0)};
}

bool is_running(const ProcessId& process) {
  const auto ticks = start_ticks_of(process.pid);
  return ticks && *ticks == process.start_ticks;
}

std::string default_journal_path() {
  if (const char* path = std::getenv("GPUCAP_RESTORE_JOURNAL"); path != nullptr && *path != '\0') return path;
  if (geteuid() == 0) return "/var/lib/gpucap/restore-journal.json";
  std::string state;
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && *xdg != '\0') {
    state = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    state = std::string(home) + "/.local/state";
  } else {
    state = "/tmp";
  }
  return state + "/gpucap/restore-journal.json";
}

RestoreJournal::RestoreJournal(std::string path) : path_(std::move(path)) {}

void RestoreJournal::record(const std::string& device_id, Control control, ControlValue original) {
  const auto folder = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
  if (ec) throw Error(ErrorCode::io, fmt::format("{}: cannot create its folder ({})", path_, ec.message()));
  const JournalLock lock(path_);
  auto entries = read_entries(path_);
  const bool known = std::any_of(entries.begin(), entries.end(), [&](const JournalEntry& e) {
    return e.device_id == device_id && e.control == control;
  });
  if (known) return;
  entries.push_back(JournalEntry{device_id, control, original, this_process()});
  write_text_file_durably(path_, serialise(entries));
}

void RestoreJournal::forget(const std::string& device_id) {
  if (!std::filesystem::exists(path_)) return;
  const JournalLock lock(path_);
  auto entries = read_entries(path_);
  const auto me = this_process();
  std::erase_if(entries, [&](const JournalEntry& e) {
    return e.device_id == device_id && (e.owner == me || !is_running(e.owner));
  });
  if (entries.empty()) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    if (ec) throw Error(ErrorCode::io, fmt::format("{}: cannot remove ({})", path_, ec.message()));
    return;
  }
  write_text_file_durably(path_, serialise(entries));
}

std::vector<JournalEntry> RestoreJournal::entries() const { return read_entries(path_); }

RecoveryReport recover_from_journal(RestoreJournal& journal, const DeviceFinder& find) {
  RecoveryReport report;
  std::vector<std::string> devices;
  auto entries = journal.entries();
  // A running owner (a run in progress elsewhere) restores its settings itself.
  std::erase_if(entries, [](const JournalEntry& e) { return is_running(e.owner); });
  for (const auto& e : entries) {
    if (std::find(devices.begin(), devices.end(), e.device_id) == devices.end()) devices.push_back(e.device_id);
  }
  for (const auto& id : devices) {
    Device* device = find(id);
    if (device == nullptr) {
      report.failures.push_back(fmt::format("GPU {} is not on this machine; its settings stay in {}", id, journal.path()));
      continue;
    }
    bool all_restored = true;
    // Newest first, as ControlSession::restore does.
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      if (it->device_id != id) continue;
      try {
        device->write_control(it->control, it->original);
        report.restored.push_back(*it);
      } catch (const std::exception& e) {
        all_restored = false;
        report.failures.push_back(fmt::format("GPU {}: {}: {}", id, describe(it->control).name, e.what()));
      }
    }
    if (all_restored) journal.forget(id);
  }
  return report;
}

}  // namespace gpucap::device
