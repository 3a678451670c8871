#include "support/cli_runner.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>

#include "gpucap/core/files.hpp"
#include "support/paths.hpp"

namespace gpucap::test {

std::string quote(const std::string& arg) {
  std::string quoted = "'";
  for (const char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

namespace {

CliResult run_gpucap(const std::vector<std::string>& args, bool with_data_dir) {
  TempDir dir;
  std::string command = quote(GPUCAP_CLI_PATH);
  if (with_data_dir) command += " --data-dir " + quote(data_dir());
  for (const auto& arg : args) command += " " + quote(arg);
  command += " >" + quote(dir.file("out")) + " 2>" + quote(dir.file("err"));
  const int status = std::system(command.c_str());
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = read_text_file(dir.file("out"));
  result.err = read_text_file(dir.file("err"));
  return result;
}

}  // namespace

CliResult gpucap(const std::vector<std::string>& args) { return run_gpucap(args, true); }

CliResult gpucap_without_data_dir(const std::vector<std::string>& args) { return run_gpucap(args, false); }

void expect_error(const std::vector<std::string>& args, int exit_code, const std::string& fragment) {
  const auto r = gpucap(args);
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  EXPECT_EQ(r.exit_code, exit_code) << joined << "\nstderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << joined << "\nstderr: " << r.err;
  EXPECT_EQ(r.err.rfind("gpucap: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << joined << "\nstderr: " << r.err;
}

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

}  // namespace gpucap::test
