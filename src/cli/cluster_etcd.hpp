#pragma once
// What the commands that talk to a real cluster share: the etcd flags, the connection, the
// protocol's timing from flags, and the signal that stops a daemon.

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "gpucap/cluster/etcd_store.hpp"
#include "gpucap/cluster/protocol.hpp"

namespace gpucap::cli {

// TLS to etcd's https:// members: the CA that signed their certificates, this client's certificate
// and key (cluster::EtcdOptions).
struct EtcdTlsFlags {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

struct EtcdFlags {
  std::string etcd = "http://127.0.0.1:2379";
  std::string cluster;
  double request_timeout_s = 2.0;
  EtcdTlsFlags tls;
};

// --etcd URL[,URL...] (default http://127.0.0.1:2379), --cluster NAME (required), --etcd-timeout,
// and the TLS files: --etcd-ca, --etcd-cert, --etcd-key.
void add_etcd_flags(CLI::App& cmd, EtcdFlags& flags);
// The TLS files' flags, named PREFIX-ca, PREFIX-cert, PREFIX-key ("--etcd", or a node's "--cluster-etcd").
void add_etcd_tls_flags(CLI::App& cmd, EtcdTlsFlags& flags, const std::string& prefix);
// Checks the flags (Error(usage) naming a bad one) and opens the store (no call is made yet).
[[nodiscard]] std::unique_ptr<cluster::EtcdStore> connect_etcd(const EtcdFlags& flags);
// The store's options from the flags (not checked: EtcdStore and check_etcd_options do).
[[nodiscard]] cluster::EtcdOptions etcd_options(const EtcdFlags& flags);

// The timing every party of one cluster must share: the lease TTL, and the time a node holds its
// cap without etcd before it falls to its safe cap. Keep-alives every TTL/3. Error(usage) when the
// protocol's timing argument does not hold (protocol.hpp).
[[nodiscard]] cluster::ProtocolTiming protocol_timing(double lease_ttl_s, double safe_cap_timeout_s);

// Blocks SIGINT and SIGTERM in this thread (and the threads it starts afterwards) and waits for
// one on a thread of its own, which then calls `on_signal` once. Destroying it stops the waiter.
class StopSignal {
 public:
  explicit StopSignal(std::function<void(int signal)> on_signal);
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

 private:
  std::thread thread_;
};

}  // namespace gpucap::cli
