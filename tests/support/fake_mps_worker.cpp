// A fake MPS worker for the tests: speaks the worker protocol (runtime/mps_protocol.hpp) on the
// descriptor in $GPUCAP_MPS_PROTOCOL_FD without any engine, written against the protocol text
// (nlohmann::json only), not gpucap's own encoder, so that the tests check the wire format.
//
// It reports the CUDA_MPS_ACTIVE_THREAD_PERCENTAGE it finds, and for a run command sleeps
// warmup_s + measure_s and reports round(rate × share / 100 × measure_s) images, rate being
// $GPUCAP_FAKE_MPS_RATE images/s at 100 % (default 1000). Each start is appended to
// $GPUCAP_FAKE_MPS_WORKER_LOG (if set): "tenant=T share=S pipe=DIR pid=P".
//
// $GPUCAP_FAKE_MPS_FAULT="TENANT:KIND:RUN[,...]" makes tenant TENANT misbehave at its RUN-th run
// command (1 = the first; 0 = at start, instead of the ready message). KIND: abort (SIGABRT),
// sigkill, exit (status 3), hang, garbage (a line that is not JSON), error (an error message,
// then status 4), wrong-share (RUN 0: reports another share), oom (reports half the batch),
// close (closes its channel and waits).

#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using nlohmann::json;

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

struct Fault {
  int tenant = -1;
  std::string kind;
  int run = -1;
};

std::vector<Fault> faults() {
  std::vector<Fault> result;
  std::stringstream list(env_or("GPUCAP_FAKE_MPS_FAULT", ""));
  std::string item;
  while (std::getline(list, item, ',')) {
    std::stringstream parts(item);
    std::string tenant;
    Fault fault;
    std::string run;
    if (std::getline(parts, tenant, ':') && std::getline(parts, fault.kind, ':') && std::getline(parts, run)) {
      fault.tenant = std::stoi(tenant);
      fault.run = std::stoi(run);
      result.push_back(fault);
    }
  }
  return result;
}

std::string fault_at(int tenant, int run) {
  for (const auto& f : faults()) {
    if (f.tenant == tenant && f.run == run) return f.kind;
  }
  return "";
}

int protocol_fd = -1;

void send_line(const std::string& text) {
  const auto line = text + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t wrote = write(protocol_fd, line.data() + done, line.size() - done);
    if (wrote <= 0) std::exit(5);
    done += static_cast<std::size_t>(wrote);
  }
}

bool read_line(std::string* line) {
  static std::string buffer;
  while (true) {
    const auto end = buffer.find('\n');
    if (end != std::string::npos) {
      *line = buffer.substr(0, end);
      buffer.erase(0, end + 1);
      return true;
    }
    char chunk[1024];
    const ssize_t got = read(protocol_fd, chunk, sizeof chunk);
    if (got <= 0) return false;
    buffer.append(chunk, static_cast<std::size_t>(got));
  }
}

[[noreturn]] void hang() {
  while (true) pause();
}

// Misbehaves as told; returns only for the kinds that change the reply (wrong-share, oom).
void misbehave(const std::string& kind) {
  if (kind == "abort") std::abort();
  if (kind == "sigkill") raise(SIGKILL);
  if (kind == "exit") std::exit(3);
  if (kind == "hang") hang();
  if (kind == "garbage") {
    send_line("this is not json {");
    hang();
  }
  if (kind == "error") {
    send_line(json{{"type", "error"}, {"message", "fake engine failure"}}.dump());
    std::exit(4);
  }
  if (kind == "close") {
    close(protocol_fd);
    hang();
  }
}

void log_start(int tenant, const json& share) {
  const auto path = env_or("GPUCAP_FAKE_MPS_WORKER_LOG", "");
  if (path.empty()) return;
  std::ofstream(path, std::ios::app) << "tenant=" << tenant << " share=" << share.dump()
                                     << " pipe=" << env_or("CUDA_MPS_PIPE_DIRECTORY", "-") << " pid=" << getpid()
                                     << "\n";
}

}  // namespace

int main() {
  protocol_fd = std::atoi(env_or("GPUCAP_MPS_PROTOCOL_FD", "-1").c_str());
  if (protocol_fd < 0) {
    std::fprintf(stderr, "fake_mps_worker: GPUCAP_MPS_PROTOCOL_FD is not set\n");
    return 2;
  }
  const int tenant = std::atoi(env_or("GPUCAP_MPS_TENANT", "-1").c_str());
  const double rate_img_s = std::atof(env_or("GPUCAP_FAKE_MPS_RATE", "1000").c_str());
  const char* share_text = std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  json share = share_text != nullptr ? json(std::atoi(share_text)) : json();
  log_start(tenant, share);

  const auto at_start = fault_at(tenant, 0);
  misbehave(at_start);
  if (at_start == "wrong-share" && share.is_number()) share = share.get<int>() + 5;
  send_line(json{{"type", "ready"}, {"share_pct", share}, {"engine", "fake"}}.dump());

  int runs = 0;
  std::string line;
  while (read_line(&line)) {
    const auto command = json::parse(line);
    if (command.at("cmd") == "quit") return 0;
    ++runs;
    const auto fault = fault_at(tenant, runs);
    misbehave(fault);
    const int batch = command.at("batch").get<int>();
    const double warmup_s = command.at("warmup_s").get<double>();
    const double measure_s = command.at("measure_s").get<double>();
    std::this_thread::sleep_for(std::chrono::duration<double>(warmup_s + measure_s));
    const double share_fraction = share.is_number() ? share.get<double>() / 100.0 : 1.0;
    const auto images = std::llround(rate_img_s * share_fraction * measure_s);
    send_line(json{{"type", "result"},
                   {"images", images},
                   {"seconds", measure_s},
                   {"batch", fault == "oom" ? std::max(1, batch / 2) : batch}}
                  .dump());
  }
  return 0;
}
