#pragma once
// What the fuzz targets share: reading the fuzzer's bytes as a few choices and a text, a scratch
// file for parsers that read a path, and the oracle every target applies.
//
// The oracle. gpucap's contract for bad input is a gpucap::Error naming what is wrong (main()
// prints it and exits with the code's status); anything else that escapes a parser is a bug that
// the user sees as "gpucap: internal error". So a target calls the parser inside refusals_only():
// a gpucap::Error is the expected refusal; an Error(internal), or any other exception, is a
// finding (abort, which libFuzzer reports with the input and the replay test fails on). Crashes,
// sanitizer reports, leaks, hangs and memory blow-ups are findings by themselves.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>

#include "gpucap/core/error.hpp"

namespace gpucap::fuzz {

// A finding: says what broke and aborts.
[[noreturn]] inline void finding(std::string_view what) {
  std::fprintf(stderr, "FUZZ FINDING: %.*s\n", static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  std::abort();
}

inline void check(bool ok, std::string_view what) {
  if (!ok) finding(what);
}

// Runs `parse`; a gpucap::Error other than Error(internal) is a refusal (returns false), success
// returns true, anything else is a finding.
template <typename F>
bool refusals_only(F&& parse) {
  try {
    parse();
    return true;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::internal) finding(std::string("Error(internal): ") + e.what());
    return false;
  } catch (const std::exception& e) {
    finding(std::string("an exception that is not a gpucap::Error: ") + e.what());
  } catch (...) {
    finding("an exception that is not a std::exception");
  }
}

// The fuzzer's bytes, read from the front as small choices and from the rest as text.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(reinterpret_cast<const char*>(data)), size_(size) {}

  // One byte (0 when none is left).
  std::uint8_t byte() {
    if (offset_ >= size_) return 0;
    return static_cast<std::uint8_t>(data_[offset_++]);
  }
  // A choice in [0, n) from one byte.
  unsigned choice(unsigned n) { return n == 0 ? 0 : byte() % n; }
  // Text up to the next occurrence of `separator` (consumed) or to the end.
  std::string_view until(std::string_view separator) {
    const std::string_view rest = remaining_view();
    const auto at = rest.find(separator);
    if (at == std::string_view::npos) {
      offset_ = size_;
      return rest;
    }
    offset_ += at + separator.size();
    return rest.substr(0, at);
  }
  // Everything not yet read.
  std::string_view rest() {
    const std::string_view out = remaining_view();
    offset_ = size_;
    return out;
  }
  [[nodiscard]] bool empty() const { return offset_ >= size_; }

 private:
  [[nodiscard]] std::string_view remaining_view() const { return {data_ + offset_, size_ - offset_}; }
  const char* data_;
  std::size_t size_;
  std::size_t offset_ = 0;
};

// A file of this process for parsers that take a path: in /dev/shm where there is one (no disk
// writes at fuzzing speed), removed at exit. `name` is its file name (some readers look at it).
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name) {
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    dir_ = base / ("gpucap-fuzz-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / name).string();
  }
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's content; returns its path.
  const std::string& write(std::string_view content) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) finding("cannot write the scratch file " + path_);
    return path_;
  }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

}  // namespace gpucap::fuzz
