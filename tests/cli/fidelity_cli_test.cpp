// `gpucap fidelity --zeus-power-trace`: the twin's training step against a Zeus power trace.

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "gpucap/core/files.hpp"
#include "support/cli_runner.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::expect_error;
using test::gpucap;

TEST(FidelityCli, AZeusTraceEndsWithTheCurvesLine) {
  const auto trace = test::shared_file("zeus/nsdi23/summary_power_p100.csv");
  test::TempDir dir;
  const auto r = gpucap({"fidelity", "--zeus-power-trace", trace, "--zeus-csv", dir.file("p100.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto last = r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
  EXPECT_TRUE(std::regex_match(
      last, std::regex(R"(zeus power-limit curves: time MAPE [0-9]+\.[0-9]% power MAPE [0-9]+\.[0-9]% \(270 configs\)\n)")))
      << last;
  EXPECT_NE(r.out.find("SIMULATED p100"), std::string::npos) << r.out;
  // The CSV holds every configuration: a header and 270 rows.
  const auto csv = read_text_file(dir.file("p100.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 271);
}

TEST(FidelityCli, AnA40TraceRunsOnTheA40TwinAndBadInputIsOneLine) {
  test::TempDir dir;
  const auto a40 = dir.write("summary_power_a40.csv",
                             "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
                             "imagenet,resnet50,128,adadelta,300,3740,244\n"
                             "imagenet,resnet50,128,adadelta,150,6147,144\n");
  const auto r = gpucap({"fidelity", "--zeus-power-trace", a40});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED a40"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(2 configs)"), std::string::npos) << r.out;

  expect_error({"fidelity", "--zeus-power-trace", a40, "--gpu", "p100"}, 2, "outside the Tesla P100-PCIE-16GB's range");
  expect_error({"fidelity", "--zeus-power-trace", dir.file("missing.csv")}, 4, "missing.csv");
  const auto bad = dir.write("summary_power_v100.csv",
                             "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
                             "imagenet,resnet50,0,adadelta,150,6147,144\n");
  expect_error({"fidelity", "--zeus-power-trace", bad}, 3, "summary_power_v100.csv:2");
  expect_error({"fidelity", "--gpu", "a40"}, 2, "--gpu and --zeus-csv go with --zeus-power-trace");
  expect_error({"fidelity", "--zeus-power-trace", a40, "--json"}, 2, "takes only --gpu and --zeus-csv");
}

}  // namespace
}  // namespace gpucap
