// The live metrics of gpucap's own work, scraped while it runs: a paced twin run, a paced share,
// bso serve's trial events, and a run on the fake NVML (loaded through the real dlopen path).

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli/metrics_scrape.hpp"
#include "support/child_process.hpp"
#include "support/cli_runner.hpp"
#include "gpucap/core/files.hpp"
#include "support/paths.hpp"
#include "support/private_prometheus.hpp"

namespace gpucap {
namespace {

using test::expect_error;

// A paced twin run, scraped while it runs: every metric with its labels, promtool clean, and the
// cap step of its schedule in the scraped series.
TEST(LiveMetrics, APacedTwinRunIsScrapedLiveAndShowsItsCapStep) {
  test::ChildProcess child({GPUCAP_CLI_PATH, "--data-dir", test::data_dir(), "run", "--gpu", "p40", "--model", "inception_v1",
                            "--algorithm", "batchdvfs", "--window", "1", "--cap-schedule", "0:180,6:120", "--duration",
                            "12", "--pace", "4", "--metrics", "127.0.0.1:0"},
                           /*merge_stderr=*/true);
  const auto url = test::read_metrics_url(child);
  ASSERT_FALSE(url.empty()) << "no metrics URL announced";
  const std::string run_labels = R"({algorithm="batchdvfs",model="inception_v1",gpu_model="p40",gpu="0",simulated="true"})";
  std::vector<double> caps;
  std::string during;  // a scrape after some windows, while the run goes on
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto text = test::scrape(url);
    if (!text) break;  // the run ended and took its exporter with it
    if (const auto windows = test::series_value(*text, "gpucap_windows_total"); windows && *windows >= 2) {
      caps.push_back(*test::series_value(*text, "gpucap_power_cap_watts"));
      if (during.empty()) during = *text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(during.empty()) << "no scrape saw two windows";
  for (const auto& name : {"gpucap_info", "gpucap_power_cap_watts", "gpucap_window_max_power_watts",
                           "gpucap_window_mean_power_watts", "gpucap_batch_size", "gpucap_sm_clock_hertz",
                           "gpucap_memory_clock_hertz", "gpucap_throughput_images_per_second", "gpucap_windows_total",
                           "gpucap_windows_over_cap_total", "gpucap_images_total"}) {
    EXPECT_NE(during.find(std::string(name) + run_labels), std::string::npos) << name;
  }
  EXPECT_NE(during.find("gpucap_tenant_mps_share_ratio{algorithm=\"batchdvfs\",model=\"inception_v1\",gpu_model=\"p40\",gpu=\"0\","
                        "simulated=\"true\",tenant=\"0\"} 1"),
            std::string::npos);
  const std::string twin_labels =
      R"({gpu="0",UUID="GPU-SIMULATED-00000000",pci_bus_id="SIMULATED:00:00.0",device="nvidia0",modelName="Tesla P40 (simulated twin)",hostname=")";
  for (const char* name : {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_SM_CLOCK",
                           "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_MGMT_LIMIT"}) {
    EXPECT_NE(during.find(std::string(name) + twin_labels), std::string::npos) << name;
  }
  // The twin has no temperature sensor: the series is left out, not exported as 0 or NaN.
  EXPECT_EQ(during.find("DCGM_FI_DEV_GPU_TEMP{"), std::string::npos);
  // The board's enforced limit (the P40's default, 250 W), not the cap.
  EXPECT_EQ(test::series_value(during, "DCGM_FI_DEV_POWER_MGMT_LIMIT"), 250.0);
  EXPECT_EQ(test::promtool_problems(during), std::vector<std::string>{});
  // The schedule's step, 180 W then 120 W, in the scraped series.
  ASSERT_FALSE(caps.empty());
  EXPECT_EQ(caps.front(), 180.0);
  EXPECT_EQ(caps.back(), 120.0);
  EXPECT_TRUE(std::is_sorted(caps.rbegin(), caps.rend()));
  const auto status = child.wait(30.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

TEST(LiveMetrics, APacedShareExportsItsWindowsAndPreemptions) {
  test::ChildProcess child({GPUCAP_CLI_PATH, "--data-dir", test::data_dir(), "share", "--gpu", "rtx2080ti", "--job",
                            "bg=train:keras_resnet50:batch=32:until=fg", "--job",
                            "fg=infer:keras_vgg16:batch=1:priority=high:requests=200:start=0.5", "--pace", "2",
                            "--power-cap", "240", "--metrics", "127.0.0.1:0"},
                           /*merge_stderr=*/true);
  const auto url = test::read_metrics_url(child);
  ASSERT_FALSE(url.empty());
  std::optional<std::string> text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    text = test::scrape(url);
    if (!text || test::series_value(*text, "gpucap_preemptions_total").value_or(0.0) >= 1.0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(text.has_value()) << "the share ended before a preemption was scraped";
  EXPECT_GE(*test::series_value(*text, "gpucap_preemptions_total"), 1.0);
  EXPECT_NE(text->find("gpucap_tenant_batch_size{algorithm=\"none\",policy=\"switchflow\",model=\"keras_resnet50,"
                       "keras_vgg16\",gpu_model=\"rtx2080ti\",gpu=\"0\""),
            std::string::npos);
  // The board's name, as on run (not the catalogue id), and the current spelling of the host label.
  EXPECT_NE(text->find("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-SIMULATED-00000000\",pci_bus_id=\"SIMULATED:00:00.0\","
                       "device=\"nvidia0\",modelName=\"NVIDIA GeForce RTX 2080 Ti (simulated twin)\",hostname=\""),
            std::string::npos);
  // The board's enforced limit is its default (the share twin turns clocks, not the limit); the cap
  // is gpucap's own series, as on run. What the share twin does not know is not exported.
  EXPECT_EQ(test::series_value(*text, "DCGM_FI_DEV_POWER_MGMT_LIMIT"), 250.0);
  EXPECT_EQ(test::series_value(*text, "gpucap_power_cap_watts"), 240.0);
  EXPECT_FALSE(test::series_value(*text, "gpucap_window_max_power_watts").has_value());
  EXPECT_FALSE(test::series_value(*text, "gpucap_sm_clock_hertz").has_value());
  EXPECT_FALSE(test::series_value(*text, "gpucap_memory_clock_hertz").has_value());
  EXPECT_FALSE(test::series_value(*text, "gpucap_batch_size").has_value());  // the jobs' differ
  EXPECT_FALSE(test::series_value(*text, "DCGM_FI_DEV_SM_CLOCK").has_value());
  EXPECT_EQ(test::promtool_problems(*text), std::vector<std::string>{});
  child.signal(SIGKILL);
}

TEST(LiveMetrics, BadFlagsAreOneLine) {
  expect_error({"run", "--gpu", "p40", "--model", "resnet50", "--algorithm", "batchdvfs", "--power-cap", "150", "--pace", "fast"},
               2, "--pace 'fast' must be 'realtime' or a speed factor");
  expect_error({"run", "--gpu", "p40", "--model", "resnet50", "--algorithm", "batchdvfs", "--power-cap", "150",
                "--metrics", "nowhere"},
               2, "--metrics 'nowhere': expected HOST:PORT, e.g. 127.0.0.1:9400");
  expect_error({"monitor", "--listen", "nowhere"}, 2, "--listen 'nowhere': expected HOST:PORT, e.g. 127.0.0.1:9400");
  expect_error({"bso", "serve", "--metrics", "h:99999"}, 2, "--metrics 'h:99999': the port must be");
  expect_error({"share", "--job", "a=train:keras_vgg16", "--pace", "0"}, 2, "--pace '0' must be");
}

// bso serve --metrics, scraped after a trial's life: registered, dispatched, a report that goes on,
// ended — counted by batch size, next to gpucap_info, and promtool-clean.
TEST(LiveMetrics, BsoServeCountsItsTrialEventsByBatchSize) {
  test::TempDir dir;
  test::ChildProcess child({GPUCAP_CLI_PATH, "bso", "serve", "--db", "sqlite:" + dir.file("bso.db"), "--listen",
                            "127.0.0.1:0", "--metrics", "127.0.0.1:0"},
                           /*merge_stderr=*/true);
  const auto url = test::read_metrics_url(child);
  ASSERT_FALSE(url.empty()) << "no metrics URL announced";
  int api_port = 0;
  static const std::regex listening(R"(listening on http://127\.0\.0\.1:([0-9]+))");
  while (const auto line = child.read_line(10.0)) {
    std::smatch match;
    if (std::regex_search(*line, match, listening)) {
      api_port = std::stoi(match[1].str());
      break;
    }
  }
  ASSERT_GT(api_port, 0) << "no API port announced";
  httplib::Client api("127.0.0.1", api_port);
  const std::string job = R"({"max_power": 250.0, "number_of_gpus": 1, "gpu_model": "NVIDIA A40", "job_id": "job-1", )"
                          R"("job_id_prefix": "job", "batch_sizes": [16, 32, 64], "default_batch_size": 32, "eta_knob": 0.5, )"
                          R"("beta_knob": 2.0, "target_metric": 0.5, "higher_is_better_metric": true, "max_epochs": 5, )"
                          R"("num_pruning_rounds": 2, "window_size": 0, "mab_prior_mean": 0.0, )"
                          R"("mab_prior_precision": 0.0, "mab_num_explorations": 2, "mab_seed": 1})";
  const auto created = api.Post("/jobs", job, "application/json");
  ASSERT_TRUE(created && created->status == 201) << (created ? created->body : "no answer");
  const auto given = api.Get("/jobs/batch_size?job_id=job-1");
  ASSERT_TRUE(given && given->status == 200) << (given ? given->body : "no answer");
  const auto trial = nlohmann::json::parse(given->body);
  const int batch = trial.at("batch_size");
  const std::string id = R"({"job_id": "job-1", "batch_size": )" + std::to_string(batch) +
                         R"(, "trial_number": )" + std::to_string(trial.at("trial_number").get<int>());
  const auto reported = api.Post("/report", id + R"(, "time": 10.0, "energy": 1000.0, "metric": 0.1, "current_epoch": 1})",
                                 "application/json");
  ASSERT_TRUE(reported && reported->status == 200) << (reported ? reported->body : "no answer");
  const auto ended = api.Patch("/trials", id + "}", "application/json");
  ASSERT_TRUE(ended && ended->status == 200) << (ended ? ended->body : "no answer");

  const auto text = test::scrape(url);
  ASSERT_TRUE(text.has_value());
  const std::string labels = R"(gpucap_bso_events_total{algorithm="bso",simulated="false",event=")";
  const auto b = std::to_string(batch);
  EXPECT_EQ(test::series_value(*text, "gpucap_bso_events_total", R"(event="job_registered",batch_size="")"), 1.0) << *text;
  for (const char* event : {"dispatched", "reported_continue", "ended"}) {
    EXPECT_NE(text->find(labels + event + R"(",batch_size=")" + b + "\"} 1"), std::string::npos) << event << "\n" << *text;
  }
  EXPECT_EQ(test::series_value(*text, "gpucap_info", R"(algorithm="bso")"), 1.0);
  EXPECT_EQ(text->find("DCGM_"), std::string::npos) << "bso serve has no GPU of its own";
  EXPECT_EQ(test::promtool_problems(*text), std::vector<std::string>{});
  child.signal(SIGTERM);
  const auto status = child.wait(10.0);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

// A paced twin run scraped every second by a real Prometheus never shows the twin's power above the
// cap for longer than the run's own summary says it was: the exported power is what the run's
// sampler saw, at its period, with the cap in force when it was taken (before, it was a reading held
// for a whole 3-s window, which showed the old power under a new, lower cap for seconds). capfit
// answers a cap change at once, so the run itself is over the cap only while its power settles.
TEST(LiveMetrics, PrometheusNeverSeesThePowerOverTheCapLongerThanTheRunSaysItWas) {
  test::ChildProcess child({GPUCAP_CLI_PATH, "--data-dir", test::data_dir(), "run", "--gpu", "a100", "--model", "resnet50",
                            "--algorithm", "capfit", "--cap-schedule", "0:250,8:180,14:230", "--duration", "20", "--pace",
                            "realtime", "--metrics", "127.0.0.1:0", "--json"},
                           /*merge_stderr=*/true);
  const auto url = test::read_metrics_url(child);
  ASSERT_FALSE(url.empty()) << "no metrics URL announced";
  const auto target = url.substr(std::string("http://").size(), url.rfind("/metrics") - std::string("http://").size());
  const double interval_s = 1.0;
  const test::PrivatePrometheus prometheus({target}, interval_s);
  std::string output;
  while (const auto line = child.read_line(60.0)) output += *line + "\n";
  const auto status = child.wait(10.0);
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << output;
  const auto summary = nlohmann::json::parse(output.substr(output.find('{')));
  const double run_over_s = summary.at("time_over_cap_s").get<double>();

  const auto power = prometheus.samples("DCGM_FI_DEV_POWER_USAGE");
  const auto cap = prometheus.samples("gpucap_power_cap_watts");
  ASSERT_GE(power.size(), 10u) << "Prometheus scraped too little of the run";
  // The scraped span holds the cap's steps (so the transitions were watched).
  std::vector<double> caps;
  for (const auto& [t, w] : cap) caps.push_back(w);
  EXPECT_NE(std::find(caps.begin(), caps.end(), 250.0), caps.end());
  EXPECT_NE(std::find(caps.begin(), caps.end(), 180.0), caps.end());
  // Both series come from the same scrapes: join them on the scrape's time.
  std::size_t over = 0;
  std::size_t joined = 0;
  for (const auto& [t, w] : power) {
    const auto c = std::find_if(cap.begin(), cap.end(), [t](const auto& s) { return s.first == t; });
    if (c == cap.end()) continue;
    ++joined;
    if (w > c->second) ++over;
  }
  ASSERT_GE(joined, 10u);
  // A scrape is one instant standing for a whole interval: one interval is the resolution.
  EXPECT_LE(static_cast<double>(over) * interval_s, run_over_s + interval_s)
      << over << " scrapes showed the power over the cap; the run says " << run_over_s << " s over";
}

// A --metrics address in use fails (exit code 4) before anything runs: no trace file is made.
TEST(LiveMetrics, ABusyMetricsAddressFailsBeforeTheRunStarts) {
  httplib::Server busy;
  const int port = busy.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  test::TempDir dir;
  const auto trace = dir.file("trace.csv");
  expect_error({"run", "--gpu", "p40", "--model", "resnet50", "--algorithm", "batchdvfs", "--power-cap", "150",
                "--images", "100", "--trace", trace, "--metrics", "127.0.0.1:" + std::to_string(port)},
               4, "cannot listen on 127.0.0.1:");
  EXPECT_FALSE(std::filesystem::exists(trace));
}

}  // namespace
}  // namespace gpucap
