#pragma once
// Ends a dispatched trial when the process goes away without the client's destructor running —
// on SIGINT or SIGTERM, at std::exit, at std::terminate — as Zeus's client does with atexit.
// Otherwise the server would keep the trial Dispatched, and the trials of a pruning round wait
// on it as on a running training.
//
// Signals: the handler only writes the signal's number to a pipe (write is async-signal-safe);
// a watcher thread reads it, ends every held trial over HTTP in ordinary thread context, puts
// back the disposition the process had before, and sends itself the signal again, so the
// process then does exactly what it would have done without the client (by default: die of the
// signal). A signal the process ignored when the first trial was held stays ignored.

#include <cstddef>
#include <cstdint>

#include "gpucap/bso/optimizer.hpp"
#include "gpucap/bsoclient/http.hpp"

namespace gpucap::bsoclient {

// PATCH /trials. Never throws: false, with a warning on stderr, when the server cannot be told
// (the process is going away; there is nobody to throw to).
bool end_trial_quietly(const HttpOptions& http, const bso::TrialId& trial) noexcept;

using HookTicket = std::uint64_t;

// Puts the trial on the list the exit hooks end; installs the hooks on first use, and the
// SIGINT/SIGTERM handlers when `on_signals` (again if a signal took them away).
[[nodiscard]] HookTicket hold_open_trial(const HttpOptions& http, const bso::TrialId& trial, bool on_signals);

// Takes the trial off the list; false when a hook has already ended it. If a hook is ending
// trials right now this waits for it, so a trial is never ended twice or left half-ended.
bool release_open_trial(HookTicket ticket) noexcept;

// How many trials the hooks hold (tests).
[[nodiscard]] std::size_t held_trial_count();

}  // namespace gpucap::bsoclient
