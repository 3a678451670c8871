#include "cluster_etcd.hpp"

#include <fmt/format.h>
#include <pthread.h>

#include <cerrno>
#include <csignal>
#include <ctime>

#include "gpucap/cluster/schema.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::cli {

void add_etcd_flags(CLI::App& cmd, EtcdFlags& flags) {
  cmd.add_option("--etcd", flags.etcd, "The cluster's etcd: one URL or a comma-separated list of its members")
      ->default_str("http://127.0.0.1:2379");
  cmd.add_option("--cluster", flags.cluster, "The cluster's name (its keys live under /gpucap/NAME/ in etcd)")->required();
  cmd.add_option("--etcd-timeout", flags.request_timeout_s, "Seconds each etcd call may take per member")
      ->default_str("2");
  add_etcd_tls_flags(cmd, flags.tls, "--etcd");
}

void add_etcd_tls_flags(CLI::App& cmd, EtcdTlsFlags& flags, const std::string& prefix) {
  cmd.add_option(prefix + "-ca", flags.ca_file,
                 "For https:// members: the PEM file of the CA that signed their certificates (default: the system's)");
  cmd.add_option(prefix + "-cert", flags.cert_file,
                 "For https:// members that ask for one (--client-cert-auth): this client's PEM certificate");
  cmd.add_option(prefix + "-key", flags.key_file, "The PEM key of " + prefix + "-cert");
}

std::unique_ptr<cluster::EtcdStore> connect_etcd(const EtcdFlags& flags) {
  cluster::check_name(flags.cluster, "--cluster");
  if (!(flags.request_timeout_s > 0.0 && flags.request_timeout_s <= 60.0)) {
    throw usage_error(fmt::format("--etcd-timeout {:g} must be in (0, 60] seconds", flags.request_timeout_s));
  }
  return std::make_unique<cluster::EtcdStore>(cluster::parse_etcd_endpoints(flags.etcd), etcd_options(flags));
}

cluster::EtcdOptions etcd_options(const EtcdFlags& flags) {
  cluster::EtcdOptions options;
  options.request_timeout_s = flags.request_timeout_s;
  options.ca_file = flags.tls.ca_file;
  options.cert_file = flags.tls.cert_file;
  options.key_file = flags.tls.key_file;
  return options;
}

cluster::ProtocolTiming protocol_timing(double lease_ttl_s, double safe_cap_timeout_s) {
  cluster::ProtocolTiming timing;
  timing.lease_ttl_s = lease_ttl_s;
  timing.keepalive_period_s = lease_ttl_s / 3.0;
  timing.safe_cap_timeout_s = safe_cap_timeout_s;
  timing.validate();
  return timing;
}

StopSignal::StopSignal(std::function<void(int signal)> on_signal) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);  // the destructor's wake-up
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([set, on_signal = std::move(on_signal)] {
    int signal = 0;
    while (sigwait(&set, &signal) != 0 || signal == 0) {
    }
    if (signal != SIGUSR1) on_signal(signal);
  });
}

StopSignal::~StopSignal() {
  // The waiter may still wait (no signal came): wake it with the one it ignores.
  pthread_kill(thread_.native_handle(), SIGUSR1);
  thread_.join();
}

}  // namespace gpucap::cli
