#include "gpucap/device/control_session.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "gpucap/core/error.hpp"
#include "support/paths.hpp"

namespace gpucap::device {
namespace {

// A device whose controls are plain variables: counts writes and fails on request.
class RecordingDevice final : public Device {
 public:
  std::map<Control, ControlValue> values = {{Control::sm_clock_lock_mhz, std::nullopt},
                                            {Control::memory_clock_lock_mhz, std::nullopt},
                                            {Control::power_limit_w, 250.0}};
  int writes = 0;
  bool writable = true;
  std::optional<Control> fail_on;
  int failures = -1;  // how many writes of fail_on fail before they succeed again (-1: all)

  [[nodiscard]] std::string name() const override { return "recording device"; }
  [[nodiscard]] bool simulated() const override { return true; }
  [[nodiscard]] bool has_signal(Signal /*signal*/) const override { return false; }
  [[nodiscard]] double read(Signal /*signal*/) override { throw Error(ErrorCode::unsupported, "no signals"); }
  [[nodiscard]] bool has_control(Control /*control*/) const override { return true; }
  [[nodiscard]] bool can_write(Control /*control*/) const override { return writable; }
  [[nodiscard]] ControlRange range(Control control) const override {
    if (control == Control::power_limit_w) return {125, 250, {}};
    return {544, 1531, {}};
  }
  [[nodiscard]] ControlValue read_control(Control control) override { return values.at(control); }
  void write_control(Control control, ControlValue value) override {
    if (fail_on == control && failures != 0) {
      if (failures > 0) --failures;
      throw Error(ErrorCode::device, "injected write failure");
    }
    ++writes;
    values[control] = value;
  }
};

TEST(ControlSession, RestoresEverythingItChanged) {
  RecordingDevice device;
  {
    ControlSession session(device);
    session.write(Control::sm_clock_lock_mhz, 1063.0);
    session.write(Control::power_limit_w, 150.0);
    session.write(Control::sm_clock_lock_mhz, 949.0);
    EXPECT_EQ(device.values[Control::sm_clock_lock_mhz], 949.0);
    EXPECT_EQ(device.values[Control::power_limit_w], 150.0);
  }  // destructor restores
  EXPECT_EQ(device.values[Control::sm_clock_lock_mhz], std::nullopt);
  EXPECT_EQ(device.values[Control::power_limit_w], 250.0);
}

TEST(ControlSession, SkipsWritesThatChangeNothing) {
  RecordingDevice device;
  ControlSession session(device);
  session.write(Control::power_limit_w, 250.0);  // already the value
  EXPECT_EQ(device.writes, 0);
  session.write(Control::sm_clock_lock_mhz, 1063.0);
  session.write(Control::sm_clock_lock_mhz, 1063.0);
  EXPECT_EQ(device.writes, 1);
  EXPECT_EQ(session.writes(), 1);
  session.restore();
  EXPECT_EQ(device.writes, 2);
}

TEST(ControlSession, OutOfRangeIsRefusedBeforeAnyWrite) {
  RecordingDevice device;
  ControlSession session(device);
  try {
    session.write(Control::power_limit_w, 300.0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::usage);
    EXPECT_NE(std::string(e.what()).find("GPU_POWER_LIMIT_CONTROL"), std::string::npos) << e.what();
  }
  Knobs knobs;
  knobs.sm_clock_mhz = 1063.0;
  knobs.power_limit_w = 50.0;  // out of range: nothing at all may be written
  EXPECT_THROW(session.apply(knobs), Error);
  EXPECT_EQ(device.writes, 0);
  EXPECT_EQ(device.values[Control::sm_clock_lock_mhz], std::nullopt);
}

TEST(ControlSession, WithoutPermissionNothingIsWritten) {
  RecordingDevice device;
  device.writable = false;
  ControlSession session(device);
  try {
    session.write(Control::sm_clock_lock_mhz, 1063.0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("no permission"), std::string::npos);
  }
  EXPECT_EQ(device.writes, 0);
  Knobs batch_only;  // batch size alone needs no device write
  EXPECT_NO_THROW(session.apply(batch_only));
}

TEST(ControlSession, FailedApplyRollsBackItsEarlierWrites) {
  RecordingDevice device;
  device.fail_on = Control::power_limit_w;
  ControlSession session(device);
  Knobs knobs;
  knobs.sm_clock_mhz = 1063.0;
  knobs.power_limit_w = 150.0;
  EXPECT_THROW(session.apply(knobs), Error);
  EXPECT_EQ(device.values[Control::sm_clock_lock_mhz], std::nullopt) << "SM clock write was rolled back";
  EXPECT_EQ(device.values[Control::power_limit_w], 250.0);
}

TEST(ControlSession, FailedRestoreIsReportedNotSwallowed) {
  RecordingDevice device;
  ControlSession session(device);
  session.write(Control::sm_clock_lock_mhz, 1063.0);
  device.fail_on = Control::sm_clock_lock_mhz;
  try {
    session.restore();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device);
    EXPECT_NE(std::string(e.what()).find("could not restore GPU_CORE_FREQUENCY_LOCK_CONTROL"), std::string::npos)
        << e.what();
  }
}

// A driver that refuses a call now and then must not leave the GPU changed.
TEST(ControlSession, RestoreTriesATransientFailureAgain) {
  RecordingDevice device;
  ControlSession session(device);
  session.write(Control::power_limit_w, 150.0);
  device.fail_on = Control::power_limit_w;
  device.failures = 2;
  session.restore();
  EXPECT_EQ(device.values[Control::power_limit_w], 250.0);
  EXPECT_EQ(device.failures, 0);
}

// A driver reset puts a control back to its default behind the session's back: the next apply
// sets it again instead of taking it as unchanged.
TEST(ControlSession, ApplySetsAgainWhatTheDeviceLost) {
  RecordingDevice device;
  ControlSession session(device);
  Knobs knobs;
  knobs.sm_clock_mhz = 1063.0;
  knobs.power_limit_w = 150.0;
  session.apply(knobs);
  EXPECT_EQ(device.writes, 2);
  session.apply(knobs);
  EXPECT_EQ(device.writes, 2) << "unchanged: nothing written";
  device.values[Control::sm_clock_lock_mhz] = std::nullopt;  // the reset
  device.values[Control::power_limit_w] = 250.0;
  session.apply(knobs);
  EXPECT_EQ(device.writes, 4);
  EXPECT_EQ(device.values[Control::sm_clock_lock_mhz], 1063.0);
  EXPECT_EQ(device.values[Control::power_limit_w], 150.0);
  session.restore();
  EXPECT_EQ(device.values[Control::sm_clock_lock_mhz], std::nullopt);
  EXPECT_EQ(device.values[Control::power_limit_w], 250.0) << "the original, not the reset's value";
}

TEST(RestoreJournal, RecordsTheFirstOriginalPerControlAndForgetsPerDevice) {
  test::TempDir dir;
  RestoreJournal journal(dir.file("state/journal.json"));
  EXPECT_TRUE(journal.entries().empty()) << "no file: nothing to restore";
  journal.record("GPU-a", Control::power_limit_w, 250.0);
  journal.record("GPU-a", Control::power_limit_w, 150.0);  // a later value is not the original
  journal.record("GPU-a", Control::sm_clock_lock_mhz, std::nullopt);
  journal.record("GPU-b", Control::power_limit_w, 300.0);
  const auto me = this_process();
  EXPECT_TRUE(is_running(me));
  const std::vector<JournalEntry> expected = {{"GPU-a", Control::power_limit_w, 250.0, me},
                                              {"GPU-a", Control::sm_clock_lock_mhz, std::nullopt, me},
                                              {"GPU-b", Control::power_limit_w, 300.0, me}};
  EXPECT_EQ(journal.entries(), expected);
  journal.forget("GPU-a");
  ASSERT_EQ(journal.entries().size(), 1u);
  journal.forget("GPU-b");
  EXPECT_FALSE(std::filesystem::exists(journal.path())) << "an empty journal is removed";
  dir.write("bad.json", "{\"version\": 1, \"entries\": [{\"device\": 3}]}");
  try {
    (void)RestoreJournal(dir.file("bad.json")).entries();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_data);
    EXPECT_NE(std::string(e.what()).find("damaged restore journal"), std::string::npos) << e.what();
  }
}

TEST(RestoreJournal, ASessionJournalsBeforeItWritesAndForgetsAfterRestoring) {
  test::TempDir dir;
  RestoreJournal journal(dir.file("journal.json"));
  RecordingDevice device;
  {
    ControlSession session(device, journal, "GPU-a");
    session.write(Control::power_limit_w, 150.0);
    session.write(Control::sm_clock_lock_mhz, 1063.0);
    const std::vector<JournalEntry> expected = {{"GPU-a", Control::power_limit_w, 250.0, this_process()},
                                                {"GPU-a", Control::sm_clock_lock_mhz, std::nullopt, this_process()}};
    EXPECT_EQ(journal.entries(), expected);
  }
  EXPECT_FALSE(std::filesystem::exists(journal.path())) << "restored: nothing left to recover";
  // A journal that cannot be written stops the write: no change without its record.
  RestoreJournal unwritable("/proc/gpucap-journal/journal.json");
  ControlSession guarded(device, unwritable, "GPU-a");
  EXPECT_THROW(guarded.write(Control::power_limit_w, 150.0), Error);
  EXPECT_EQ(device.values[Control::power_limit_w], 250.0);
}

// A pid above Linux's largest (4194304): never a running process.
constexpr long kDeadPid = 999'999'999;

TEST(RestoreJournal, RecoveryPutsBackWhatAKilledProcessLeftAndKeepsWhatItCannot) {
  test::TempDir dir;
  // Written by a process that has died since.
  const auto path = dir.write("journal.json", R"({"version": 1, "entries": [
      {"device": "GPU-a", "control": "GPU_POWER_LIMIT_CONTROL", "original": 250.0, "pid": 999999999, "pid_start_ticks": 7},
      {"device": "GPU-a", "control": "GPU_CORE_FREQUENCY_LOCK_CONTROL", "original": null, "pid": 999999999,
       "pid_start_ticks": 7},
      {"device": "GPU-gone", "control": "GPU_POWER_LIMIT_CONTROL", "original": 300.0, "pid": 999999999,
       "pid_start_ticks": 7}]})");
  RestoreJournal journal(path);
  RecordingDevice device;
  device.values[Control::power_limit_w] = 150.0;  // as the killed process left it
  device.values[Control::sm_clock_lock_mhz] = 949.0;
  const auto report = recover_from_journal(
      journal, [&device](const std::string& id) -> Device* { return id == "GPU-a" ? &device : nullptr; });
  EXPECT_EQ(report.restored.size(), 2u);
  EXPECT_EQ(device.values[Control::power_limit_w], 250.0);
  EXPECT_EQ(device.values[Control::sm_clock_lock_mhz], std::nullopt);
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_NE(report.failures[0].find("GPU-gone"), std::string::npos);
  const std::vector<JournalEntry> left = {{"GPU-gone", Control::power_limit_w, 300.0, ProcessId{kDeadPid, 7}}};
  EXPECT_EQ(journal.entries(), left);
}

TEST(RestoreJournal, RecoveryLeavesTheSettingsOfARunningRunAlone) {
  test::TempDir dir;
  RestoreJournal journal(dir.file("journal.json"));
  journal.record("GPU-a", Control::power_limit_w, 250.0);  // this process: running
  RecordingDevice device;
  device.values[Control::power_limit_w] = 150.0;
  const auto report = recover_from_journal(journal, [&device](const std::string&) -> Device* { return &device; });
  EXPECT_TRUE(report.restored.empty());
  EXPECT_TRUE(report.failures.empty());
  EXPECT_EQ(device.values[Control::power_limit_w], 150.0) << "a run in progress keeps its settings";
  EXPECT_EQ(journal.entries().size(), 1u);
}

}  // namespace
}  // namespace gpucap::device
