#include "support/private_etcd.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "support/free_port.hpp"

namespace gpucap::test {
namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";

bool healthy(int port, const TestPki* tls) {
  httplib::Client client(fmt::format("{}://127.0.0.1:{}", tls ? "https" : "http", port), tls ? tls->client_cert : "",
                         tls ? tls->client_key : "");
  if (tls) client.set_ca_cert_path(tls->ca_cert);
  client.set_connection_timeout(1);
  client.set_read_timeout(2);
  const auto answer = client.Get("/health");
  return answer && answer->status == 200 && answer->body.find("\"true\"") != std::string::npos;
}

}  // namespace

PrivateEtcd::PrivateEtcd(int members, const TestPki* tls) : scheme_(tls ? "https" : "http") {
  if (!std::filesystem::exists(kEtcd)) {
    throw std::runtime_error("etcd is missing (/usr/bin/etcd): install the etcd-server package (scripts/setup.sh does)");
  }
  std::vector<int> peer_ports;
  std::string initial_cluster;
  for (int i = 0; i < members; ++i) {
    client_ports_.push_back(free_port());
    peer_ports.push_back(free_port());
    initial_cluster += fmt::format("{}m{}=http://127.0.0.1:{}", i == 0 ? "" : ",", i, peer_ports.back());
  }
  for (int i = 0; i < members; ++i) {
    const auto client_url = fmt::format("{}://127.0.0.1:{}", scheme_, client_ports_[static_cast<std::size_t>(i)]);
    const auto peer_url = fmt::format("http://127.0.0.1:{}", peer_ports[static_cast<std::size_t>(i)]);
    // Short heartbeat and election timeouts: loopback, so a killed leader is replaced in well
    // under a second (etcd's defaults are 100 ms and 1 s).
    std::vector<std::string> argv{kEtcd, "--name", fmt::format("m{}", i), "--data-dir", dir_.file(fmt::format("m{}", i)),
                                  "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                                  "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                                  "--initial-cluster", initial_cluster, "--initial-cluster-state", "new",
                                  "--initial-cluster-token", "gpucap-test", "--heartbeat-interval", "50",
                                  "--election-timeout", "500", "--log-level", "error", "--logger", "zap"};
    if (tls) {
      for (const auto& flag : {"--cert-file=" + tls->server_cert, "--key-file=" + tls->server_key,
                               "--trusted-ca-file=" + tls->ca_cert, std::string("--client-cert-auth")}) {
        argv.push_back(flag);
      }
    }
    servers_.push_back(std::make_unique<ChildProcess>(argv, /*merge_stderr=*/true));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (const int port : client_ports_) all = all && healthy(port, tls);
    if (all) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error(fmt::format("etcd ({} members) did not become healthy within 30 s", members));
}

PrivateEtcd::~PrivateEtcd() {
  for (auto& server : servers_) {
    if (!server) continue;
    server->signal(SIGTERM);
    if (!server->wait(10.0)) server->signal(SIGKILL);
  }
}

std::string PrivateEtcd::endpoint(int member) const {
  return fmt::format("{}://127.0.0.1:{}", scheme_, client_ports_.at(static_cast<std::size_t>(member)));
}

std::string PrivateEtcd::endpoints() const {
  std::string out;
  for (int i = 0; i < members(); ++i) out += (i == 0 ? "" : ",") + endpoint(i);
  return out;
}

void PrivateEtcd::kill(int member) {
  auto& server = servers_.at(static_cast<std::size_t>(member));
  if (!server) return;
  server->signal(SIGKILL);
  (void)server->wait(10.0);
  server.reset();
}

}  // namespace gpucap::test
