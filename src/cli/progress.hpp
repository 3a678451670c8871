#pragma once
// Progress of a long command on stderr (internal to src/cli): `calibrate` (minutes), `fidelity`
// (minutes), `bench`. One line per stage, with the time since the command started, on a terminal
// and in a log alike, so that a run whose output goes to a file or CI still says what it is doing.

#include <chrono>
#include <cstddef>
#include <string>

namespace gpucap::cli {

class StageProgress {
 public:
  // `command`: the words after "gpucap" that start each line ("calibrate").
  explicit StageProgress(std::string command);
  // "gpucap calibrate [  12 s]: zeus: fitting 84 parameters ..."
  void stage(const std::string& what) const;
  [[nodiscard]] double elapsed_s() const;

 private:
  std::string command_;
  std::chrono::steady_clock::time_point start_;
};

// bench's runs: on a terminal, a bar redrawn in place; otherwise a line at each tenth of the runs
// (and the last), so a log gets about ten lines however large the matrix.
class CountProgress {
 public:
  CountProgress(std::string command, bool terminal);
  void operator()(std::size_t done, std::size_t total);

 private:
  StageProgress lines_;
  bool terminal_;
  std::size_t last_tenth_ = 0;
};

// Whether standard error is a terminal.
[[nodiscard]] bool stderr_is_terminal();

}  // namespace gpucap::cli
