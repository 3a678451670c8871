#pragma once
// `gpucap serve --cap-file F`: a file a node's power agent rewrites, watched on a thread of its own.

#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/stderr_line.hpp"

#include "gpucap/serve/cap_state.hpp"
#include "gpucap/serve/serving_runtime.hpp"
#include "gpucap/service/serve_metrics.hpp"

namespace gpucap::cli {

inline constexpr double kCapFilePollS = 0.2;  // how often the file is read

// Watches --cap-file (a power agent rewrites it): a new content that is a cap sets it; one that
// is not (malformed, unreadable, out of range) keeps the last good cap, with a log line and the
// cap-file metrics. A rewrite with the same content is the agent saying its cap again: it sets it
// once more if another source (an operator's PUT, a schedule's step) has set another since, and
// is otherwise nothing new (no log line for an agent that rewrites its cap every second).
class CapFileWatcher {
 public:
  // `start_text`: the content read at the start, whose cap is in force (serve's initial_cap): a
  // rewrite between that read and this watcher's first is a change, not the content it knows.
  CapFileWatcher(std::string path, std::string start_text, serve::CapState& cap, serve::ServingRuntime& runtime,
                 service::ServeMetrics* metrics)
      : path_(std::move(path)), cap_(cap), runtime_(runtime), metrics_(metrics) {
    last_ = std::move(start_text);
    last_good_w_ = serve::parse_cap_file(last_, path_);  // in force: serve's initial_cap took it
    last_stamp_ = stamp();
    if (metrics_ != nullptr) metrics_->cap_file(true);
    thread_ = std::thread([this] { watch(); });
  }
  ~CapFileWatcher() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  CapFileWatcher(const CapFileWatcher&) = delete;
  CapFileWatcher& operator=(const CapFileWatcher&) = delete;

 private:
  // Which file, written when: a rewrite in place moves the modification time, a rename over it
  // brings another inode. Empty when the file cannot be looked at.
  std::string stamp() const {
    struct stat s {};
    if (::stat(path_.c_str(), &s) != 0) return {};
    return fmt::format("{}:{}.{}:{}", s.st_ino, s.st_mtim.tv_sec, s.st_mtim.tv_nsec, s.st_size);
  }

  std::string read_or_error() const {
    try {
      return read_text_file(path_);
    } catch (const Error& e) {
      return std::string("\x01") + e.what();  // unreadable: not a content a file can have
    }
  }

  void watch() {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::duration<double>(kCapFilePollS), [this] { return stop_; })) {
      const auto file_stamp = stamp();  // before the read: a write after it shows at the next poll
      const auto text = read_or_error();
      const bool rewritten = file_stamp != last_stamp_;
      last_stamp_ = file_stamp;
      if (text == last_ && !(rewritten && reasserts())) continue;
      last_ = text;
      try {
        if (text.starts_with('\x01')) throw Error(ErrorCode::io, text.substr(1));
        const double watts = serve::parse_cap_file(text, path_);
        cap_.set(watts, "file", runtime_.now_s());
        runtime_.cap_changed();
        if (metrics_ != nullptr) metrics_->cap_file(true);
        last_good_w_ = watts;
        print_stderr_line("gpucap serve: the cap is {:g} W from now on (--cap-file {})", watts, path_);
      } catch (const std::exception& e) {  // gpucap's errors, and anything else: this thread must not end the server
        last_good_w_.reset();
        cap_.note_error("file", e.what());
        if (metrics_ != nullptr) metrics_->cap_file(false);
        const auto kept = cap_.at(runtime_.now_s());
        print_stderr_line("gpucap serve: warning: --cap-file: {}; the cap stays {:g} W (from {})", e.what(), kept.cap_w,
                          kept.source);
      }
    }
  }

  // Whether the same content, written again, changes the cap in force: it was a good cap, and
  // another source set another since. A content refused (unreadable, not a cap, out of range) is
  // not said again.
  bool reasserts() const {
    if (!last_good_w_) return false;
    const auto now = cap_.at(runtime_.now_s());
    return now.source != "file" || now.cap_w != *last_good_w_;
  }

  std::string path_;
  serve::CapState& cap_;
  serve::ServingRuntime& runtime_;
  service::ServeMetrics* metrics_;
  std::string last_;
  std::string last_stamp_;
  std::optional<double> last_good_w_;  // the cap last_ holds; nullopt: it was refused
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpucap::cli
