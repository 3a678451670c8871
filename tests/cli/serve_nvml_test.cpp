// `gpucap serve --platform nvml` without a GPU: the fake NVML at the library boundary, the LibTorch
// engine running an exported model on the CPU (fixture export_torch_models) on the requests' own
// data; the GPU's settings restored at SIGTERM, and after a SIGKILL by the next gpucap start.

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <thread>

#include "gpucap/core/files.hpp"
#include "support/child_process.hpp"
#include "support/cli_runner.hpp"
#include "support/fake_nvml_gpu.hpp"
#include "support/paths.hpp"
#include "support/scoped_env.hpp"

namespace gpucap {
namespace {

using FakeGpu = test::FakeNvmlGpu;

std::string model_file(const std::string& suffix) { return std::string(GPUCAP_TEST_MODELS_DIR) + "/mnasnet0_5" + suffix; }

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> values;
  float v = 0.0F;
  while (in.read(reinterpret_cast<char*>(&v), sizeof v)) values.push_back(v);
  return values;
}

// A binary infer request of `images` copies of the reference image, as Triton's client sends one;
// the answer's status, or 0 if none came (the connection failed or the server died).
int post_images(int port, int images) {
  const auto input = read_floats(model_file(".input.f32"));
  const std::size_t per_image = 3 * 224 * 224;
  const nlohmann::json header = {
      {"inputs", {{{"name", "input"}, {"shape", {images, 3, 224, 224}}, {"datatype", "FP32"},
                   {"parameters", {{"binary_data_size", static_cast<std::size_t>(images) * per_image * 4}}}}}}};
  auto body = header.dump();
  const auto header_length = body.size();
  for (int i = 0; i < images; ++i) body.append(reinterpret_cast<const char*>(input.data()), per_image * 4);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120);
  const auto r = client.Post("/v2/models/mnasnet0_5/infer", {{"Inference-Header-Content-Length", std::to_string(header_length)}},
                             body, "application/octet-stream");
  return r ? r->status : 0;
}

std::unique_ptr<test::ChildProcess> start(const std::vector<std::string>& extra, int& port) {
  std::vector<std::string> argv = {GPUCAP_CLI_PATH, "serve", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH,
                                   "--model-file", model_file(".pt"), "--engine-device", "cpu", "--input-size", "224",
                                   "--power-settle-s", "0", "--power-cap", "150", "--algorithm", "static",
                                   "--listen", "127.0.0.1:0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto child = std::make_unique<test::ChildProcess>(argv);
  static const std::regex inference(R"(inference \(KServe v2\)\s+http://127\.0\.0\.1:([0-9]+)/)");
  while (const auto line = child->read_line(120.0)) {
    std::smatch m;
    if (std::regex_search(*line, m, inference)) port = std::stoi(m[1]);
    if (line->find("stop with Ctrl-C") != std::string::npos) break;
  }
  return child;
}

// The reference image through the server, binary as Triton's client sends it, against the output
// Python's model gave for it.
TEST(ServeNvml, ServesTheRealModelOnTheRequestsDataAsPythonDoes) {
  const FakeGpu fake;
  int port = 0;
  // A 300-ms queue delay: two requests sent at once are stacked into one batch.
  auto server = start({"--json", "--max-queue-delay-us", "300000"}, port);
  ASSERT_GT(port, 0) << "the server did not start";
  const auto input = read_floats(model_file(".input.f32"));
  const auto expected = read_floats(model_file(".output.f32"));
  const std::size_t per_image = 3 * 224 * 224;
  ASSERT_GE(input.size(), 2 * per_image);
  ASSERT_GE(expected.size(), 2u * 1000u);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60);
  const auto model = nlohmann::json::parse(client.Get("/v2/models/mnasnet0_5")->body);
  EXPECT_EQ(model["outputs"][0]["shape"], nlohmann::json::array({-1, 1000}));
  EXPECT_EQ(model["platform"], "pytorch_libtorch");
  // Images [first, first + count) in one request, each answered with Python's output for it. The
  // batches go 1, 2, 1 images, then two requests of one in one batch: the backend's input buffer,
  // kept across batches, grows and shrinks, and stacks requests in their order.
  const auto ask = [&](std::size_t first, std::size_t count) {
    httplib::Client own("127.0.0.1", port);  // its own connection: two asks may run at once
    own.set_read_timeout(60);
    const nlohmann::json header = {
        {"inputs", {{{"name", "input"}, {"shape", {count, 3, 224, 224}}, {"datatype", "FP32"},
                     {"parameters", {{"binary_data_size", count * per_image * 4}}}}}},
        {"parameters", {{"binary_data_output", true}}}};
    auto body = header.dump();
    const auto header_length = body.size();
    body.append(reinterpret_cast<const char*>(input.data() + first * per_image), count * per_image * 4);
    const auto r = own.Post("/v2/models/mnasnet0_5/infer",
                            {{"Inference-Header-Content-Length", std::to_string(header_length)}}, body,
                            "application/octet-stream");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_FALSE(r->has_header("X-Gpucap-Simulated"));
    const auto json_length = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
    ASSERT_EQ(r->body.size(), json_length + count * 1000 * 4);
    std::vector<float> output(count * 1000);
    std::memcpy(output.data(), r->body.data() + json_length, output.size() * 4);
    double worst = 0.0;
    for (std::size_t i = 0; i < output.size(); ++i) {
      const double want = expected[first * 1000 + i];
      worst = std::max(worst, std::abs(static_cast<double>(output[i]) - want) / (1e-3 + std::abs(want)));
    }
    EXPECT_LT(worst, 1e-3) << "images " << first << ".." << first + count - 1 << ": worst relative difference from Python";
  };
  ask(0, 1);
  ask(0, 2);
  ask(1, 1);
  auto second = std::async(std::launch::async, [&] { ask(1, 1); });
  ask(0, 1);
  second.get();
  EXPECT_TRUE(fake.writes().empty()) << "without --allow-gpu-control nothing is written";
  server->signal(SIGTERM);
  std::string summary;
  while (const auto line = server->read_line(60.0)) {
    if (!summary.empty() || line->starts_with("{")) summary += *line + "\n";
  }
  const auto status = server->wait(60.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  const auto totals = nlohmann::json::parse(summary);
  EXPECT_EQ(totals["answered"], 5);
  EXPECT_EQ(totals["batches"], 4) << "the last two requests were not stacked into one batch";
}

// With control the static setting writes the power limit (= the cap), journaled first: a SIGKILL
// in the middle of a batch leaves it changed, and the next gpucap start puts it back. A SIGTERM
// restores it itself.
TEST(ServeNvml, TheGpuIsRestoredAtSigtermAndAfterASigkillMidBatchByTheNextStart) {
  if (geteuid() != 0) GTEST_SKIP() << "NVML writes need root";
  const FakeGpu fake;
  const auto limit_mw = [&fake] { return fake.gpu()["power_limit_mw"].get<int>(); };
  ASSERT_EQ(limit_mw(), 400000);
  {
    int port = 0;
    auto server = start({"--allow-gpu-control"}, port);
    ASSERT_GT(port, 0);
    EXPECT_EQ(limit_mw(), 150000) << "the power limit follows the cap";
    server->signal(SIGTERM);
    const auto status = server->wait(60.0);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << (WIFSIGNALED(*status) ? "killed by signal " + std::to_string(WTERMSIG(*status))
                                 : "exit " + std::to_string(WEXITSTATUS(*status)));
    EXPECT_EQ(limit_mw(), 400000) << "restored at SIGTERM";
    EXPECT_FALSE(std::filesystem::exists(fake.journal()));
  }
  int port = 0;
  auto server = start({"--allow-gpu-control", "--max-batch-size", "32"}, port);
  ASSERT_GT(port, 0);
  EXPECT_EQ(limit_mw(), 150000);
  // Killed mid-batch: three clients send requests of 32 images back to back (the CPU engine's
  // batches follow each other with no pause), and the kill comes once some have been answered,
  // with each client's next one still in the server.
  std::atomic<bool> killed = false;
  std::atomic<int> answered = 0;
  std::vector<std::future<bool>> clients;  // whether the client's last request went unanswered
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::async(std::launch::async, [&killed, &answered, port] {
      while (!killed) {
        if (post_images(port, 32) != 200) return true;
        ++answered;
      }
      return false;
    }));
  }
  for (int i = 0; i < 1200 && answered < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(answered.load(), 2) << "the server answered too few requests to be killed mid-run";
  server->signal(SIGKILL);
  killed = true;
  ASSERT_TRUE(server->wait(30.0).has_value());
  int unanswered = 0;
  for (auto& c : clients) unanswered += c.get() ? 1 : 0;
  EXPECT_GT(unanswered, 0) << "no request was in the server at the kill";
  EXPECT_EQ(limit_mw(), 150000) << "a killed server cannot restore";
  EXPECT_TRUE(std::filesystem::exists(fake.journal()));
  // The next start of any command that controls GPUs (the journal names the library it used).
  const test::ScopedEnv library("GPUCAP_NVML_LIB", GPUCAP_FAKE_NVML_PATH);
  const auto next = test::gpucap({"devices"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(limit_mw(), 400000) << "the next start restored it from the journal";
  EXPECT_FALSE(std::filesystem::exists(fake.journal()));
}

// The GPU's power readings start failing while the server runs: the serving loop fails, and the
// server drains, restores the GPU and exits non-zero by itself (a supervisor restarts it), instead
// of staying up, ready by its health route, answering every request 503.
TEST(ServeNvml, AServingLoopThatFailsEndsTheServerWithAnError) {
  const FakeGpu fake(true, {{"fail_after", {{"nvmlDeviceGetPowerUsage", {300, 999}}}}});
  std::vector<std::string> argv = {GPUCAP_CLI_PATH, "serve", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH,
                                   "--model-file", model_file(".pt"), "--engine-device", "cpu", "--input-size", "224",
                                   "--power-settle-s", "0", "--power-cap", "150", "--algorithm", "static",
                                   "--listen", "127.0.0.1:0"};
  const bool control = geteuid() == 0;  // NVML writes need root: then the power limit is set, and put back
  if (control) argv.emplace_back("--allow-gpu-control");
  test::ChildProcess server(argv, /*merge_stderr=*/true);
  std::string output;
  bool started = false;
  bool failed = false;
  while (const auto line = server.read_line(60.0)) {
    output += *line + "\n";
    started = started || line->find("stop with Ctrl-C") != std::string::npos;
    failed = failed || line->find("gpucap serve: the serving loop failed: draining") != std::string::npos;
  }
  EXPECT_TRUE(started) << output;
  EXPECT_TRUE(failed) << output;
  EXPECT_NE(output.find("gpucap: error: nvmlDeviceGetPowerUsage"), std::string::npos) << output;
  const auto status = server.wait(30.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) != 0) << output;
  if (control) {
    EXPECT_EQ(fake.writes().size(), 2U) << fake.writes().dump();  // 150 W, then back
    EXPECT_EQ(fake.gpu()["power_limit_mw"], 400000) << "restored after the failure";
    EXPECT_FALSE(std::filesystem::exists(fake.journal()));
  }
}

// --warmup on runs every batch size the server may batch before it says it serves, and says so;
// auto on the CPU (every other test here) runs none.
TEST(ServeNvml, TheWarmUpRunsEveryBatchSizeBeforeServing) {
  const FakeGpu fake;
  const auto banner = [](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {GPUCAP_CLI_PATH, "serve", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH,
                                     "--model-file", model_file(".pt"), "--engine-device", "cpu", "--input-size", "224",
                                     "--power-settle-s", "0", "--power-cap", "150", "--algorithm", "static",
                                     "--listen", "127.0.0.1:0", "--max-batch-size", "3"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    test::ChildProcess server(argv);
    std::string text;
    while (const auto line = server.read_line(120.0)) {
      text += *line + "\n";
      if (line->find("stop with Ctrl-C") != std::string::npos) break;
    }
    server.signal(SIGTERM);
    const auto status = server.wait(60.0);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << text;
    return text;
  };
  const auto on = banner({"--warmup", "on"});
  EXPECT_TRUE(std::regex_search(on, std::regex(R"(\n  warmed up +batch sizes 1-3, 2 passes each, [0-9]+\.[0-9] s\n)"))) << on;
  EXPECT_LT(on.find("warmed up"), on.find("stop with Ctrl-C")) << on;
  const auto automatic = banner({});
  EXPECT_NE(automatic.find("stop with Ctrl-C"), std::string::npos) << automatic;
  EXPECT_EQ(automatic.find("warmed up"), std::string::npos) << automatic;
}

// The model file's name is the served model's, in URLs, JSON and metric labels: it must be UTF-8.
TEST(ServeNvml, AModelFileWhoseNameIsNotUtf8IsRefused) {
  const FakeGpu fake;
  test::expect_error({"serve", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--model-file", "/tmp/r\xe9snet.pt",
                      "--engine-device", "cpu", "--power-cap", "150", "--algorithm", "static"},
                     2, "the served model's name) is not UTF-8 text");
  EXPECT_TRUE(fake.writes().empty());
}

// Below the board's lowest power limit (the fake's: 100 W) no controller holds a cap: refused at
// the start, as a PUT of it would be, and nothing is written to the GPU.
TEST(ServeNvml, ACapBelowTheBoardsLowestPowerLimitIsRefused) {
  const FakeGpu fake;
  test::expect_error({"serve", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--model-file", model_file(".pt"),
                      "--engine-device", "cpu", "--power-cap", "50", "--algorithm", "static", "--listen", "127.0.0.1:0"},
                     2, "outside what the GPU can draw");
  EXPECT_TRUE(fake.writes().empty());
}

TEST(ServeNvml, CapserveOnARealGpuNeedsAProfile) {
  const FakeGpu fake;
  test::expect_error({"serve", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--model-file", model_file(".pt"),
                      "--engine-device", "cpu", "--power-cap", "150"},
                     2, "capserve on a real GPU runs from a profile");
}

// A profile holds one model's figures on one GPU with one engine setup. One that tune measured with
// the server's flags is served from; one measured otherwise (here: images of 32 pixels, and the
// server takes 224) is refused by its difference before serving, with the command that measures
// the right one.
TEST(ServeNvml, AProfileIsServedFromOnlyWhereItWasMeasured) {
  const FakeGpu fake;
  test::TempDir dir;
  const auto tune = [&dir](const std::string& input_size) {
    const auto r = test::gpucap({"tune", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--model-file",
                                 model_file(".pt"), "--engine-device", "cpu", "--input-size", input_size,
                                 "--power-settle-s", "0", "--warmup-s", "0.05", "--measure-s", "0.3", "--power-cap", "150",
                                 "--algorithm", "oracle", "--batch-sizes", "1,2", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return dir.write("profile-" + input_size + ".json", r.out);
  };
  const auto other = tune("32");
  test::expect_error({"serve", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH, "--model-file", model_file(".pt"),
                      "--engine-device", "cpu", "--input-size", "224", "--power-cap", "150", "--listen", "127.0.0.1:0",
                      "--profile", other},
                     2,
                     "--profile " + other + ": it was measured with input size 32, and this runs 224; measure this one's with "
                     "'gpucap tune --platform nvml --model-file " + model_file(".pt") + " --precision fp32 --input-size 224 "
                     "--engine-device cpu --algorithm oracle --power-cap W --json'");
  EXPECT_TRUE(fake.writes().empty());

  int port = 0;
  auto server = start({"--profile", tune("224")}, port);
  ASSERT_GT(port, 0) << "the server did not start from tune's own profile";
  EXPECT_EQ(post_images(port, 1), 200);
  server->signal(SIGTERM);
  const auto status = server->wait(60.0);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

// Without --allow-gpu-control the GPU keeps its clocks and limit: a seed that sets them is refused
// by name before serving, and nothing is written.
TEST(ServeNvml, AnAlgorithmThatSetsClocksOrTheLimitNeedsGpuControl) {
  const FakeGpu fake;
  const std::vector<std::string> base = {"serve", "--platform", "nvml", "--nvml-lib", GPUCAP_FAKE_NVML_PATH,
                                         "--model-file", model_file(".pt"), "--engine-device", "cpu",
                                         "--power-cap", "150", "--listen", "127.0.0.1:0", "--algorithm"};
  auto with = [&base](const std::string& algorithm) {
    auto argv = base;
    argv.push_back(algorithm);
    return argv;
  };
  test::expect_error(with("batchdvfs"), 2, "--algorithm batchdvfs locks the SM clock: on a real GPU it needs --allow-gpu-control");
  test::expect_error(with("powercap"), 2, "--algorithm powercap sets the power limit: on a real GPU it needs --allow-gpu-control");
  EXPECT_TRUE(fake.writes().empty());
}

}  // namespace
}  // namespace gpucap
