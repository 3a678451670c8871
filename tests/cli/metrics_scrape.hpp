#pragma once
// Scraping an exporter gpucap started (a child process) and checking the text with Prometheus's
// own promtool (Debian package prometheus, installed by scripts/setup.sh).

#include <httplib.h>

#include <cstdio>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "support/child_process.hpp"
#include "support/paths.hpp"

namespace gpucap::test {

// The http://HOST:PORT/metrics URL in a line of the child's output ("... metrics at URL ..."), read
// within `timeout_s`; empty if none came.
inline std::string read_metrics_url(ChildProcess& child, double timeout_s = 30.0) {
  static const std::regex url(R"(http://[0-9.]+:[0-9]+/metrics)");
  while (const auto line = child.read_line(timeout_s)) {
    std::smatch match;
    if (std::regex_search(*line, match, url)) return match.str();
  }
  return {};
}

// GET url; nullopt when it does not answer 200.
inline std::optional<std::string> scrape(const std::string& url) {
  const auto rest = url.substr(std::string("http://").size());
  const auto colon = rest.find(':');
  const auto slash = rest.find('/');
  httplib::Client client(rest.substr(0, colon), std::stoi(rest.substr(colon + 1, slash - colon - 1)));
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  const auto answer = client.Get(rest.substr(slash).c_str());
  if (!answer || answer->status != 200) return std::nullopt;
  return answer->body;
}

// What `promtool check metrics` says about `text` beyond dcgm-exporter's and Triton's own names,
// which gpucap keeps on purpose (a counter without _total, the camelCase label modelName, "_us"
// and "_count" in Triton's names); {"promtool: ..."}
// when promtool cannot be run or finds the text malformed.
inline std::vector<std::string> promtool_problems(const std::string& text) {
  TempDir dir;
  const auto file = dir.write("metrics.prom", text);
  const auto command = "promtool check metrics < '" + file + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {"promtool: cannot run it"};
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 127) return {"promtool: not installed (apt-get install prometheus; scripts/setup.sh)"};
  if (code != 0 && code != 3) return {"promtool: exit " + std::to_string(code) + ": " + output};  // 3: lint only
  static const std::regex dcgm_naming(
      R"(^DCGM_FI_DEV_\w+ (label names should be written in 'snake_case' not 'camelCase'|counter metrics should have "_total" suffix)$)");
  // Triton's request families (gpucap serve) keep Triton's names, which the linter also objects to.
  static const std::regex triton_naming(
      R"(^nv_inference_\w+ (counter metrics should have "_total" suffix|metric names should not contain abbreviated units|non-histogram and non-summary metrics should not have "_count" suffix)$)");
  std::vector<std::string> problems;
  for (const auto line : split(output, '\n')) {
    const std::string text_line(trim(line));
    if (!text_line.empty() && !std::regex_match(text_line, dcgm_naming) && !std::regex_match(text_line, triton_naming)) {
      problems.push_back(text_line);
    }
  }
  return problems;
}

// The value of the first series of `name` whose labels contain `labels_fragment`; nullopt if none.
inline std::optional<double> series_value(const std::string& text, const std::string& name,
                                          const std::string& labels_fragment = "") {
  for (const auto line : split(text, '\n')) {
    const std::string l(line);
    if (!l.starts_with(name + "{") && !l.starts_with(name + " ")) continue;
    if (l.find(labels_fragment) == std::string::npos) continue;
    return std::stod(l.substr(l.rfind(' ') + 1));
  }
  return std::nullopt;
}

}  // namespace gpucap::test
