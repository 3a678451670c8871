// gpucap serve's cap from its file beside an operator's PUT, and a server whose log reader has gone:
// both as a process, on the twin.

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "cli/metrics_scrape.hpp"
#include "cli/serve_child.hpp"
#include "support/paths.hpp"

namespace gpucap {
namespace {

using test::Server;

const std::string kCapSeries =
    R"(gpucap_power_cap_watts{algorithm="capserve",model="noop",gpu_model="a100",gpu="0",simulated="true"} )";

// The power agent rewrites its file with the cap it already wrote: that is the agent saying its
// cap again, which takes it back from an operator's PUT since; with the file's cap in force, the
// same rewrite changes nothing, and a refused content written again is not refused again.
TEST(ServeCapSources, AnAgentRewritingItsCapTakesItBackFromAnOperatorsPut) {
  test::TempDir dir;
  const auto file = dir.write("cap", "240\n");
  const auto token = dir.write("token", "s3cret\n");
  Server server({"--model", "noop", "--cap-file", file, "--admin", "127.0.0.1:0", "--admin-token-file", token, "--metrics",
                 "127.0.0.1:0"});
  ASSERT_TRUE(server.started());
  (void)server.wait_for_metrics(kCapSeries + "240");
  const auto put = server.admin().Put("/v1/power/cap", {{"Authorization", "Bearer s3cret"}}, R"({"watts": 180})",
                                      "application/json");
  ASSERT_TRUE(put && put->status == 200);
  (void)server.wait_for_metrics(kCapSeries + "180");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // three reads of the unchanged file: the PUT holds
  EXPECT_EQ(test::series_value(server.scrape(), "gpucap_power_cap_watts"), 180.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a modification time of its own
  (void)dir.write("cap", "240\n");
  const auto text = server.wait_for_metrics(kCapSeries + "240");
  EXPECT_NE(text.find(R"(gpucap_power_cap_source{source="file"} 1)"), std::string::npos) << text;
  // A cap the GPU cannot draw is refused once; written again, it is not refused (nor logged) again.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  (void)dir.write("cap", "9999\n");
  (void)server.wait_for_metrics("gpucap_cap_file_errors_total 1\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  (void)dir.write("cap", "9999\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const auto after = server.scrape();
  EXPECT_EQ(test::series_value(after, "gpucap_cap_file_errors_total"), 1.0);
  EXPECT_EQ(test::series_value(after, "gpucap_power_cap_watts"), 240.0);
}

// --power-cap beside a --cap-schedule holds until the schedule's first step, and says it is the
// flag's (docs/serve.md), as a --cap-file's cap there says it is the file's.
TEST(ServeCapSources, APowerCapBesideAScheduleSaysItIsTheFlags) {
  test::TempDir dir;
  const auto token = dir.write("token", "s3cret\n");
  Server server({"--model", "noop", "--power-cap", "250", "--cap-schedule", "600:180", "--admin", "127.0.0.1:0",
                 "--admin-token-file", token});
  ASSERT_TRUE(server.started());
  const auto power = server.admin().Get("/v1/power", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(power && power->status == 200);
  const auto body = nlohmann::json::parse(power->body);
  EXPECT_EQ(body["cap_w"], 250.0);
  EXPECT_EQ(body["source"], "flag");
}

// stderr piped into a reader that has gone: the server's next log lines are lost, not the server.
// Its cap-file thread logs the change it sets, it answers requests after that, and SIGTERM still
// drains it to an exit of its own (not a signal's).
TEST(ServeCapSources, AServerOutlivesTheReaderOfItsLog) {
  test::TempDir dir;
  const auto file = dir.write("cap", "240\n");
  Server server({"--model", "noop", "--cap-file", file, "--metrics", "127.0.0.1:0"}, /*merge_stderr=*/true);
  ASSERT_TRUE(server.started());
  server.process().close_output();
  (void)dir.write("cap", "200\n");
  (void)server.wait_for_metrics(kCapSeries + "200");
  (void)dir.write("cap", "190\n");
  (void)server.wait_for_metrics(kCapSeries + "190");
  const auto answer = server.client().Post(
      "/v2/models/noop/infer",
      R"({"inputs": [{"name": "input", "shape": [1, 16], "datatype": "FP32", "data": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]})",
      "application/json");
  ASSERT_TRUE(answer) << "the server is gone";
  EXPECT_EQ(answer->status, 200);
  server.process().signal(SIGTERM);
  const auto status = server.process().wait(30.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status)) << "ended by signal " << (WIFSIGNALED(*status) ? WTERMSIG(*status) : 0);
}

}  // namespace
}  // namespace gpucap
