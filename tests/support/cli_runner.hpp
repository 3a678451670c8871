#pragma once
// Runs the gpucap binary (GPUCAP_CLI_PATH, set by CMake) as a user would, for end-to-end tests.

#include <string>
#include <vector>

namespace gpucap::test {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `arg` in single quotes for /bin/sh.
[[nodiscard]] std::string quote(const std::string& arg);

// `gpucap --data-dir DATA ARGS...`, stdout and stderr captured; the environment is inherited.
[[nodiscard]] CliResult gpucap(const std::vector<std::string>& args);
// `gpucap ARGS...` without --data-dir: where the data folder comes from is the test's subject.
[[nodiscard]] CliResult gpucap_without_data_dir(const std::vector<std::string>& args);

// Bad input: the given exit code and exactly one line on stderr, "gpucap: error: ...", that
// contains `fragment`.
void expect_error(const std::vector<std::string>& args, int exit_code, const std::string& fragment);

[[nodiscard]] std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more);

}  // namespace gpucap::test
