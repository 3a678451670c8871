// Every flag that names a file or folder gpucap writes refuses '-' (other tools read it as
// standard output; gpucap would create a file named '-') and an empty path, with one line and
// exit code 2 before anything runs; a device file such as /dev/stdout is written through.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/cli_runner.hpp"

namespace gpucap {
namespace {

using test::gpucap;

// Each command and its output flag (the only argument given: the flag is checked as it is parsed).
const std::vector<std::vector<std::string>> kOutputFlags = {
    {"run", "--trace"},          {"run", "--search-out"},  {"share", "--trace"},     {"bench", "--out"},
    {"bso", "bench", "--out"},   {"fidelity", "--report"}, {"fidelity", "--plots"},  {"fidelity", "--zeus-csv"},
    {"fit", "--out"},            {"monitor", "--csv"},     {"profile", "--out"},     {"tune", "--out"},
};

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
  return text;
}

TEST(OutputPaths, ADashIsRefusedAsAPathNotWrittenAsAFileNamedDash) {
  ASSERT_FALSE(std::filesystem::exists("-")) << "a file named '-' is already in the tests' folder";
  for (auto args : kOutputFlags) {
    const std::string flag = args.back();
    args.push_back("-");
    const auto r = gpucap(args);
    EXPECT_EQ(r.exit_code, 2) << joined(args) << ": " << r.err;
    EXPECT_EQ(r.err, "gpucap: error: " + flag + ": '-' is not standard output here: give a path (see --help)\n")
        << joined(args);
  }
  EXPECT_FALSE(std::filesystem::exists("-"));
}

TEST(OutputPaths, AnEmptyPathIsRefused) {
  for (auto args : kOutputFlags) {
    const std::string flag = args.back();
    args.push_back("");
    const auto r = gpucap(args);
    EXPECT_EQ(r.exit_code, 2) << joined(args) << ": " << r.err;
    EXPECT_EQ(r.err, "gpucap: error: " + flag + ": must name a path, not '' (see --help)\n") << joined(args);
  }
}

// What to give instead of '-': the trace's rows come on standard output, after its header.
TEST(OutputPaths, DevStdoutTakesTheTraceOnStandardOutput) {
  const auto r = gpucap({"run", "--gpu", "p40", "--model", "inception_v1", "--dataset", "imagenet", "--algorithm",
                         "batchdvfs", "--power-cap", "131", "--duration", "10", "--trace", "/dev/stdout"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("time_s,window_start_s,cap_w,", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(",131,"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpucap
