#pragma once
// A real etcd cluster (Debian's `etcd-server`, installed by scripts/setup.sh) that a test starts
// in a temporary folder: `members` members on 127.0.0.1 and free ports, one data folder each. A
// member can be killed (SIGKILL) and the rest go on while a majority lives. Everything is stopped
// and removed when the object goes.

#include <memory>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/paths.hpp"
#include "support/test_pki.hpp"

namespace gpucap::test {

class PrivateEtcd {
 public:
  // Throws std::runtime_error when etcd is missing or the cluster has no leader within 30 s.
  // With `tls`, the members serve clients over TLS only (https://, the PKI's server certificate)
  // and ask every client for a certificate the PKI's CA signed (--client-cert-auth).
  explicit PrivateEtcd(int members = 3, const TestPki* tls = nullptr);
  ~PrivateEtcd();
  PrivateEtcd(const PrivateEtcd&) = delete;
  PrivateEtcd& operator=(const PrivateEtcd&) = delete;

  // "http://127.0.0.1:P1,http://127.0.0.1:P2,..." (https:// with TLS): what --etcd / --cluster-etcd take.
  [[nodiscard]] std::string endpoints() const;
  [[nodiscard]] std::string endpoint(int member) const;
  [[nodiscard]] int members() const { return static_cast<int>(client_ports_.size()); }
  // SIGKILLs one member (and reaps it).
  void kill(int member);

 private:
  TempDir dir_;
  std::string scheme_ = "http";
  std::vector<int> client_ports_;
  std::vector<std::unique_ptr<ChildProcess>> servers_;
};

}  // namespace gpucap::test
