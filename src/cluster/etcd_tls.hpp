#pragma once
// The etcd client's connections (etcd_store.cpp): one HTTP client per member, plain or TLS, the
// TLS options checked before any is used, and the SIGPIPE a TLS connection can raise kept from the
// process.

#include <httplib.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "gpucap/cluster/etcd_store.hpp"

namespace gpucap::cluster::detail {

// A client for one member: plain HTTP, or TLS with the options' CA (the system's when none is
// given) and this client's certificate, if any.
[[nodiscard]] std::unique_ptr<httplib::Client> member_client(const ServerUrl& endpoint, const EtcdOptions& options);

// Error(usage) for TLS options that cannot work (etcd_store.hpp, EtcdStore's constructor).
void check_tls(const std::vector<ServerUrl>& endpoints, const EtcdOptions& options);

// What a failed connection to an https:// member most likely means, from cpp-httplib's error, for
// the message that names the member: "" when nothing more can be said.
[[nodiscard]] std::string tls_hint(httplib::Error transport_error, const EtcdOptions& options);

// While it lives, a write to a connection the peer closed fails with EPIPE in this thread instead
// of raising SIGPIPE, whose default ends the process. cpp-httplib sends with MSG_NOSIGNAL, but
// OpenSSL writes a TLS connection with plain write(). A SIGPIPE raised meanwhile is taken before
// the old mask comes back (one already pending is left alone).
class NoSigpipe {
 public:
  NoSigpipe();
  ~NoSigpipe();
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t old_mask_{};
  bool pending_before_ = false;
};

}  // namespace gpucap::cluster::detail
