// Every flag that names a file or folder gpucap writes refuses '-' (other tools read it as
// standard output; gpucap would create a file named '-') and an empty path, with one line and
// exit code 2 before anything runs; a device file such as /dev/stdout is written through.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/cli_runner.hpp"
#include "support/paths.hpp"

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

// With standard output redirected to a file, the trace and the summary share the file's offset:
// rows first, then the summary (opened anew, /dev/stdout would be replaced or written over).
TEST(OutputPaths, DevStdoutRedirectedToAFileKeepsTheTraceAndTheSummary) {
  test::TempDir dir;
  const auto out = dir.file("out.txt");
  const auto command = test::quote(GPUCAP_CLI_PATH) + " --data-dir " + test::quote(test::data_dir()) +
                       " run --gpu p40 --model inception_v1 --dataset imagenet --algorithm batchdvfs --power-cap 131 "
                       "--duration 10 --trace /dev/stdout > " +
                       test::quote(out);
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("time_s,window_start_s,cap_w,", 0), 0u) << text;
  const auto last_row = text.find("\n10.050,");
  const auto summary = text.find("mean power");
  ASSERT_NE(last_row, std::string::npos) << text;
  ASSERT_NE(summary, std::string::npos) << text;
  EXPECT_LT(last_row, summary) << text;
}

}  // namespace
}  // namespace gpucap
