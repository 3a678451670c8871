#include "gpucap/cluster/realtime.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>

namespace gpucap::cluster {

StepLoop::StepLoop(double max_sleep_s) : max_sleep_s_(max_sleep_s), start_(std::chrono::steady_clock::now()) {}

double StepLoop::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void StepLoop::run(const Step& step) {
  while (!stopped()) {
    const double now = now_s();
    const double next = step(now);
    const double sleep_s = std::clamp(std::isfinite(next) ? next - now_s() : max_sleep_s_, 0.0, max_sleep_s_);
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, std::chrono::duration<double>(sleep_s), [this] { return stop_; });
  }
}

void StepLoop::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
}

bool StepLoop::stopped() const {
  std::lock_guard lock(mutex_);
  return stop_;
}

std::string report_prefix(const Keys& keys) { return keys.root() + "status/"; }

std::string report_key(const Keys& keys, std::string_view node_id) { return report_prefix(keys) + std::string(node_id); }

std::string to_json(const NodeReport& report) {
  nlohmann::json out{{"cap_w", report.cap_w},
                     {"throughput_rps", report.throughput_rps},
                     {"slo_attainment", report.slo_attainment},
                     {"unix_s", report.unix_s},
                     {"gpu", report.gpu},
                     {"model", report.model},
                     {"simulated", report.simulated}};
  // JSON has no NaN: an unknown power is left out.
  if (std::isfinite(report.power_w)) out["power_w"] = report.power_w;
  return out.dump();
}

Parsed<NodeReport> parse_node_report(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::string("not a JSON object");
  NodeReport report;
  const auto number = [&j](const char* key, double& out, bool required) -> std::optional<std::string> {
    const auto it = j.find(key);
    if (it == j.end()) return required ? std::optional<std::string>(fmt::format("'{}' is missing", key)) : std::nullopt;
    if (!it->is_number() || !std::isfinite(it->get<double>())) return fmt::format("'{}' must be a finite number", key);
    out = it->get<double>();
    return std::nullopt;
  };
  report.power_w = std::nan("");
  for (const auto& [key, out, required] : {std::tuple{"cap_w", &report.cap_w, true},
                                           std::tuple{"power_w", &report.power_w, false},
                                           std::tuple{"throughput_rps", &report.throughput_rps, true},
                                           std::tuple{"slo_attainment", &report.slo_attainment, false},
                                           std::tuple{"unix_s", &report.unix_s, true}}) {
    if (auto problem = number(key, *out, required)) return *problem;
  }
  // Informational fields of another type are dropped, not an error (and never a throw).
  const auto text_of = [&j](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  report.gpu = text_of("gpu");
  report.model = text_of("model");
  const auto simulated = j.find("simulated");
  report.simulated = simulated != j.end() && simulated->is_boolean() && simulated->get<bool>();
  return report;
}

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace gpucap::cluster
