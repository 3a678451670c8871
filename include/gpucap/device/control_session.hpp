#pragma once
// Every write to a device goes through a ControlSession. It
//  - checks each value against the device's range and write permission before writing anything,
//    so bad input never half-applies a change;
//  - skips writes that would not change the value;
//  - saves a control's original value before the first write to it, and puts every saved
//    control back on restore() or destruction (a failed restore is reported, never swallowed);
//  - with a restore journal, records that original value durably before the first write, and
//    forgets it once restore() succeeded, so a killed process's changes are undone by the next
//    gpucap start (restore_journal.hpp).

#include <string>
#include <utility>
#include <vector>

#include "gpucap/core/knobs.hpp"
#include "gpucap/device/device.hpp"
#include "gpucap/device/restore_journal.hpp"

namespace gpucap::device {

class ControlSession {
 public:
  explicit ControlSession(Device& device);
  // `device_id` names the device in the journal (an NVIDIA GPU's UUID).
  ControlSession(Device& device, RestoreJournal& journal, std::string device_id);
  ControlSession(const ControlSession&) = delete;
  ControlSession& operator=(const ControlSession&) = delete;
  // Restores; a failure is logged at error level (destructors must not throw).
  ~ControlSession();

  // Throws Error(usage) for a value outside the range, Error(unsupported) for a control the
  // device lacks or may not write. Nothing is written when it throws.
  void check(Control control, ControlValue value) const;

  void write(Control control, ControlValue value);

  // Applies the device-side knobs (SM clock, memory clock, power limit) that are set; all are
  // checked before the first write, and on a failed write the ones already written are rolled back.
  // A control this session set that the device no longer holds (a driver reset put it back to its
  // default, someone else changed it) is written again; that is logged once per session.
  void apply(const Knobs& knobs);

  // Puts every saved control back as it was found. Tries all, then throws Error(device) naming
  // each control that could not be restored.
  void restore();

  [[nodiscard]] const std::vector<std::pair<Control, ControlValue>>& saved() const { return saved_; }
  [[nodiscard]] int writes() const { return writes_; }

 private:
  [[nodiscard]] bool is_saved(Control control) const;

  Device& device_;
  RestoreJournal* journal_ = nullptr;
  std::string device_id_;
  std::vector<std::pair<Control, ControlValue>> saved_;    // original values, in first-write order
  std::vector<std::pair<Control, ControlValue>> current_;  // last value written per control
  int writes_ = 0;
  bool drift_said_ = false;
};

}  // namespace gpucap::device
