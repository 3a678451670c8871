#pragma once
// Typed errors. Every failure the user can cause is thrown as gpucap::Error with a
// code; main() catches it once, prints one line and maps the code to an exit status.

#include <stdexcept>
#include <string>

namespace gpucap {

enum class ErrorCode {
  usage,          // bad flag value, unknown name, value out of range
  invalid_data,   // malformed data, trace or matrix file
  io,             // a file that cannot be read or written
  unsupported,    // a signal or control the device does not have
  device,         // a device call that failed
  not_converged,  // a calibration fit that did not converge (nothing was written)
  no_gpu,         // no NVIDIA driver or NVML library: real GPUs are unavailable (the twin is not)
  interrupted,    // stopped by SIGINT/SIGTERM (every GPU setting was restored)
  internal,       // a bug: an invariant that should never break
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// Exit status for each error code (documented in docs/cli.md).
[[nodiscard]] int exit_code(ErrorCode code) noexcept;
[[nodiscard]] const char* error_kind(ErrorCode code) noexcept;

// "FILE:LINE: message", the form every file-format error uses.
[[nodiscard]] Error data_error(const std::string& file, std::size_t line, const std::string& message);

[[nodiscard]] inline Error usage_error(const std::string& message) {
  return Error(ErrorCode::usage, message);
}

}  // namespace gpucap
