// `gpucap load` from the command line against a twin server (the no-op model): what a run that
// measured nothing says, and the flags refused before anything is sent. The generator's own counts
// and framing are load_generator_test.cpp's.

#include <gtest/gtest.h>

#include <string>

#include "cli/serve_child.hpp"
#include "support/cli_runner.hpp"

namespace gpucap {
namespace {

using test::Server;

// Every request of the run falls in the warm-up: the report is printed, then one line says that
// it measured nothing, exit 2 (not a perfect attainment over no request and exit 0).
TEST(LoadCli, ARunThatMeasuredNothingSaysSo) {
  Server server({"--model", "noop", "--power-cap", "250"});
  ASSERT_TRUE(server.started());
  const auto url = "http://127.0.0.1:" + std::to_string(server.port());
  const auto r = test::gpucap({"load", "--url", url, "--model", "noop", "--rate", "100", "--max-requests", "5", "--warmup",
                               "1", "--duration", "2", "--json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("nothing was measured: all 5 requests were scheduled in the 1-s warm-up"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("\"warmup_requests\": 5"), std::string::npos) << r.out;
  // No request at all in the run (a schedule at 0 over it) is not a warm-up's doing.
  const auto idle = test::gpucap({"load", "--url", url, "--model", "noop", "--rate-schedule", "0:0,60:50", "--duration",
                                  "0.3"});
  EXPECT_EQ(idle.exit_code, 2) << idle.err;
  EXPECT_NE(idle.err.find("nothing was measured: no request was scheduled in the 0.3 s of the run"), std::string::npos)
      << idle.err;
  // Refused before anything is sent: a duration a clock could not hold.
  test::expect_error({"load", "--url", url, "--model", "noop", "--rate", "10", "--duration", "1e10"}, 2,
                     "--duration must be a positive number of seconds up to 604800");
}

}  // namespace
}  // namespace gpucap
