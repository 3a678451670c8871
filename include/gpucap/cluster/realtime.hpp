#pragma once
// What runs the cluster's pure cores (Coordinator, NodeAgent: step(now) → when to call again) in
// real time, against etcd: a loop on the steady clock, and what a node reports for
// `gpucap cluster status` (its measured power and throughput), kept beside its record.
//
// The loop sleeps until the time step() asked for, but never longer than max_sleep_s: a watch's
// events arrive on the store's own threads, and the step polls them; max_sleep_s bounds how late
// an allocation or an acknowledgement is seen (the protocol's watch latency).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "gpucap/cluster/schema.hpp"

namespace gpucap::cluster {

class StepLoop {
 public:
  using Step = std::function<double(double now_s)>;

  explicit StepLoop(double max_sleep_s = 0.05);

  // Seconds on the steady clock since the loop was made: the `now` the cores get.
  [[nodiscard]] double now_s() const;
  // Calls step(now) until stop(); rethrows what step throws.
  void run(const Step& step);
  // Thread-safe; run() returns after the step in progress.
  void stop();
  [[nodiscard]] bool stopped() const;

 private:
  double max_sleep_s_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
};

// A node's measurements, under status/<node> (the node's own lease: it goes with the node).
struct NodeReport {
  double cap_w = 0.0;            // the cap in force
  double power_w = 0.0;          // the last window's highest power sample (NaN: none yet)
  double throughput_rps = 0.0;   // requests (or items) per second answered in the last window
  double slo_attainment = 1.0;   // of the last window's answers, the share within the SLO
  double unix_s = 0.0;           // when it was measured, by the node's wall clock
  std::string gpu;
  std::string model;
  bool simulated = false;        // a twin node: its figures are simulated
};

[[nodiscard]] std::string report_key(const Keys& keys, std::string_view node_id);
[[nodiscard]] std::string report_prefix(const Keys& keys);
[[nodiscard]] std::string to_json(const NodeReport& report);
[[nodiscard]] Parsed<NodeReport> parse_node_report(std::string_view text);

// Seconds since the Unix epoch, now (for reports and the nodes' cap logs).
[[nodiscard]] double unix_now_s();

}  // namespace gpucap::cluster
