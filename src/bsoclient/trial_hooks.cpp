#include "gpucap/bsoclient/trial_hooks.hpp"

#include <fcntl.h>
#include <signal.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gpucap::bsoclient {
namespace {

// A process going away should not wait long on a dead server.
constexpr double kExitConnectTimeoutS = 2.0;
constexpr double kExitReadTimeoutS = 5.0;

struct Held {
  HookTicket ticket = 0;
  HttpOptions http;
  bso::TrialId trial;
};

constexpr std::array<int, 2> kSignals = {SIGINT, SIGTERM};

// Process-wide by nature (signals and atexit are). Allocated once and never freed: the hooks may
// run during static destruction, after a function-local static would be gone.
struct Hooks {
  std::mutex mutex;
  std::vector<Held> held;
  HookTicket next_ticket = 1;
  bool exit_hooks_installed = false;
  std::terminate_handler previous_terminate = nullptr;
  bool watcher_started = false;
  std::array<bool, kSignals.size()> handler_installed{};
  std::array<struct sigaction, kSignals.size()> previous_action{};
};

Hooks& hooks() {
  static auto* instance = new Hooks;
  return *instance;
}

// Read by the signal handler: a lock-free atomic is async-signal-safe, the Hooks struct is not.
std::atomic<int> g_signal_pipe_write{-1};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_signal(int signal_number) {
  const int saved_errno = errno;
  const auto byte = static_cast<unsigned char>(signal_number);
  const int fd = g_signal_pipe_write.load();
  if (fd >= 0) {
    [[maybe_unused]] const auto written = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

std::size_t signal_slot(int signal_number) {
  return static_cast<std::size_t>(std::find(kSignals.begin(), kSignals.end(), signal_number) - kSignals.begin());
}

// Ends every held trial. The caller holds the mutex.
void end_all_locked(Hooks& h) {
  for (const auto& held : h.held) (void)end_trial_quietly(held.http, held.trial);
  h.held.clear();
}

// The caller holds the mutex.
void restore_signal_locked(Hooks& h, int signal_number) {
  const auto slot = signal_slot(signal_number);
  if (slot >= kSignals.size() || !h.handler_installed[slot]) return;
  sigaction(signal_number, &h.previous_action[slot], nullptr);
  h.handler_installed[slot] = false;
}

void watch_signals(int read_fd) {
  for (;;) {
    unsigned char byte = 0;
    const auto n = ::read(read_fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    const int signal_number = byte;
    {
      auto& h = hooks();
      std::lock_guard lock(h.mutex);
      end_all_locked(h);
      restore_signal_locked(h, signal_number);
    }
    // To the whole process, so that whichever thread the old disposition picks handles it.
    ::kill(::getpid(), signal_number);
  }
}

// The caller holds the mutex.
void start_watcher_locked(Hooks& h) {
  if (h.watcher_started) return;
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
    fmt::print(stderr, "bso client: warning: no pipe for the signal handler; SIGINT/SIGTERM will not end the trial\n");
    return;
  }
  // A full pipe must not block the handler; one pending byte per signal is enough.
  ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  g_signal_pipe_write.store(fds[1]);
  std::thread(watch_signals, fds[0]).detach();  // lives as long as the process
  h.watcher_started = true;
}

// The caller holds the mutex.
void install_signal_handlers_locked(Hooks& h) {
  start_watcher_locked(h);
  if (!h.watcher_started) return;
  for (std::size_t slot = 0; slot < kSignals.size(); ++slot) {
    if (h.handler_installed[slot]) continue;
    struct sigaction previous {};
    sigaction(kSignals[slot], nullptr, &previous);
    if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_IGN) continue;  // e.g. nohup
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(kSignals[slot], &action, &h.previous_action[slot]);
    h.handler_installed[slot] = true;
  }
}

void end_at_exit() {
  auto& h = hooks();
  std::lock_guard lock(h.mutex);
  end_all_locked(h);
}

void end_at_terminate() {
  auto& h = hooks();
  // std::terminate may come from a thread that holds the mutex: then leave the trials be rather
  // than deadlock.
  std::unique_lock lock(h.mutex, std::try_to_lock);
  if (lock.owns_lock()) end_all_locked(h);
  auto previous = h.previous_terminate;
  lock = {};
  if (previous != nullptr) previous();
  std::abort();
}

// The caller holds the mutex.
void install_exit_hooks_locked(Hooks& h) {
  if (h.exit_hooks_installed) return;
  std::atexit(end_at_exit);
  h.previous_terminate = std::set_terminate(end_at_terminate);
  h.exit_hooks_installed = true;
}

}  // namespace

bool end_trial_quietly(const HttpOptions& http, const bso::TrialId& trial) noexcept {
  try {
    auto options = http;
    options.connect_timeout_s = std::min(options.connect_timeout_s, kExitConnectTimeoutS);
    options.read_timeout_s = std::min(options.read_timeout_s, kExitReadTimeoutS);
    const nlohmann::json body = {
        {"job_id", trial.job_id}, {"batch_size", trial.batch_size}, {"trial_number", trial.trial_number}};
    (void)JsonHttp(options).patch("/trials", body);
    return true;
  } catch (const std::exception& e) {
    // Not spdlog: at exit its registry may already be destroyed.
    try {
      fmt::print(stderr, "bso client: warning: could not end trial {} of job {}: {}\n", trial.trial_number,
                 trial.job_id, e.what());
    } catch (...) {
    }
    return false;
  }
}

HookTicket hold_open_trial(const HttpOptions& http, const bso::TrialId& trial, bool on_signals) {
  auto& h = hooks();
  std::lock_guard lock(h.mutex);
  install_exit_hooks_locked(h);
  if (on_signals) install_signal_handlers_locked(h);
  const HookTicket ticket = h.next_ticket++;
  h.held.push_back(Held{ticket, http, trial});
  return ticket;
}

bool release_open_trial(HookTicket ticket) noexcept {
  auto& h = hooks();
  std::lock_guard lock(h.mutex);
  const auto it = std::find_if(h.held.begin(), h.held.end(), [&](const Held& held) { return held.ticket == ticket; });
  if (it == h.held.end()) return false;
  h.held.erase(it);
  return true;
}

std::size_t held_trial_count() {
  auto& h = hooks();
  std::lock_guard lock(h.mutex);
  return h.held.size();
}

}  // namespace gpucap::bsoclient
