#pragma once
// The protocol between gpucap and its MPS workers (one process per tenant): newline-delimited
// JSON, one object per line, over a socket pair (the worker's fd 3; `gpucap mps-worker` can also
// use stdin/stdout).
//
//   worker → gpucap, once its model is loaded:
//       {"type":"ready","share_pct":25,"engine":"LibTorch m.pt (cuda, fp16)"}
//     share_pct is the CUDA_MPS_ACTIVE_THREAD_PERCENTAGE the worker found in its environment
//     (null when unset), so gpucap can check that each worker runs with its own share.
//   gpucap → worker:  {"cmd":"run","batch":16,"warmup_s":2,"measure_s":3}
//   worker → gpucap:  {"type":"result","images":4800,"seconds":3.01,"batch":16}
//     batch is the batch size actually used: like upstream, a worker halves its batch on an
//     out-of-memory error until it fits.
//   worker → gpucap:  {"type":"error","message":"..."}   (the worker then exits)
//   gpucap → worker:  {"cmd":"quit"}                       (the worker exits with status 0)

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "gpucap/runtime/mps_process.hpp"

namespace gpucap::runtime {

// Environment of a worker: its tenant index (for its own messages and logs) and, for
// `gpucap mps-worker`, the descriptor it speaks the protocol on.
inline constexpr const char* kMpsTenantEnv = "GPUCAP_MPS_TENANT";
inline constexpr const char* kMpsProtocolFdEnv = "GPUCAP_MPS_PROTOCOL_FD";
inline constexpr const char* kMpsShareEnv = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
inline constexpr const char* kMpsPipeDirEnv = "CUDA_MPS_PIPE_DIRECTORY";
inline constexpr const char* kMpsLogDirEnv = "CUDA_MPS_LOG_DIRECTORY";

// A line longer than this is not a message of the protocol (garbage, or a runaway writer).
inline constexpr std::size_t kMpsMaxLineBytes = 64 * 1024;

struct MpsCommand {
  enum class Kind { run, quit };
  Kind kind = Kind::quit;
  int batch = 0;          // run: >= 1
  double warmup_s = 0.0;  // run: >= 0
  double measure_s = 0.0; // run: > 0
};

struct MpsMessage {
  enum class Kind { ready, result, error };
  Kind kind = Kind::error;
  // ready
  std::optional<int> share_pct;
  std::string engine;
  // result
  long long images = 0;
  double seconds = 0.0;
  int batch = 0;
  // error
  std::string message;
};

// One line, '\n' included.
[[nodiscard]] std::string encode(const MpsCommand& command);
[[nodiscard]] std::string encode(const MpsMessage& message);
// Error(invalid_data) saying what is wrong for a line that is not a valid command / message.
[[nodiscard]] MpsCommand parse_mps_command(std::string_view line);
[[nodiscard]] MpsMessage parse_mps_message(std::string_view line);

// The share a worker finds in its environment: the value of CUDA_MPS_ACTIVE_THREAD_PERCENTAGE if
// it is a whole number, else nullopt.
[[nodiscard]] std::optional<int> mps_share_from_environment();

// Reads lines from a descriptor. Never blocks longer than asked.
class LineReader {
 public:
  enum class Status { line, timeout, closed };

  explicit LineReader(int fd) : fd_(fd) {}
  // The next line (without '\n') in *line, waiting at most until deadline_s (steady_now_s());
  // `closed` at end of file or when the peer is gone. Error(invalid_data) for a line over
  // kMpsMaxLineBytes.
  Status next(double deadline_s, std::string* line);
  // Whether a complete line is already buffered.
  [[nodiscard]] bool has_line() const;
  // Reads what is available now (no waiting) into the buffer; false at end of file.
  bool fill();
  // Takes a buffered line, if one is complete.
  bool take_line(std::string* line);

 private:
  int fd_;
  std::string buffer_;
};

// Writes all of `text` (EINTR retried, no SIGPIPE on a socket whose peer is gone); false when the
// peer is gone or the write failed.
bool write_all(int fd, std::string_view text) noexcept;

}  // namespace gpucap::runtime
