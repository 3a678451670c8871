// EtcdStore over TLS: a real etcd (one member) that serves clients over https only and asks each for
// a certificate signed by its CA (--client-cert-auth), with a CA made by the test. Calls and watches
// work with the CA and a client certificate; without the certificate, or trusting another CA, every
// call fails as etcd unreachable, naming why; TLS options that cannot work are refused up front.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "gpucap/cluster/etcd_store.hpp"
#include "support/expect_error.hpp"
#include "support/private_etcd.hpp"
#include "support/test_pki.hpp"

namespace gpucap::cluster {
namespace {

class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<test::TempDir>();
    pki_ = std::make_unique<test::TestPki>(test::make_test_pki(*dir_));
    etcd_ = std::make_unique<test::PrivateEtcd>(1, pki_.get());
  }
  static void TearDownTestSuite() {
    etcd_.reset();
    pki_.reset();
    dir_.reset();
  }

  static EtcdOptions trusted() {
    EtcdOptions options;
    options.ca_file = pki_->ca_cert;
    options.cert_file = pki_->client_cert;
    options.key_file = pki_->client_key;
    return options;
  }

  static void expect_unreachable(EtcdOptions options, const std::string& why, const std::string& hint) {
    options.request_timeout_s = 2.0;
    EtcdStore store(parse_etcd_endpoints(etcd_->endpoints()), options);
    try {
      (void)store.get("/gpucap/tls/k");
      ADD_FAILURE() << "a call without " << why << " succeeded";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.kind(), StoreErrorKind::unavailable) << e.what();
      EXPECT_NE(std::string(e.what()).find(etcd_->endpoint(0)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(hint), std::string::npos) << e.what();
    }
  }

  static std::unique_ptr<test::TempDir> dir_;
  static std::unique_ptr<test::TestPki> pki_;
  static std::unique_ptr<test::PrivateEtcd> etcd_;
};

std::unique_ptr<test::TempDir> EtcdTlsTest::dir_;
std::unique_ptr<test::TestPki> EtcdTlsTest::pki_;
std::unique_ptr<test::PrivateEtcd> EtcdTlsTest::etcd_;

TEST_F(EtcdTlsTest, CallsAndWatchesWorkWithTheCaAndAClientCertificate) {
  ASSERT_EQ(etcd_->endpoint(0).rfind("https://", 0), 0U);
  EtcdStore store(parse_etcd_endpoints(etcd_->endpoints()), trusted());
  const auto watch = store.watch("/gpucap/tls/", store.get("/gpucap/tls/k").revision + 1, true);
  (void)store.put(PutOp{"/gpucap/tls/k", "secret", 0});
  const auto read = store.get("/gpucap/tls/k");
  ASSERT_EQ(read.kvs.size(), 1U);
  EXPECT_EQ(read.kvs.front().value, "secret");
  std::vector<WatchEvent> events;
  for (int i = 0; i < 500 && events.empty(); ++i) {
    events = store.poll(watch);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events.front().kv.value, "secret");
  store.cancel(watch);
}

TEST_F(EtcdTlsTest, WithoutTheClientCertificateOrTrustingAnotherCaEveryCallFails) {
  auto no_certificate = trusted();
  no_certificate.cert_file.clear();
  no_certificate.key_file.clear();
  expect_unreachable(no_certificate, "a client certificate", "asks for a client certificate");
  auto other_ca = trusted();
  other_ca.ca_file = pki_->other_ca_cert;
  expect_unreachable(other_ca, "a server certificate its CA signed", "not signed by the CA given");
  auto system_ca = trusted();
  system_ca.ca_file.clear();  // the system's CAs did not sign the test's server
  expect_unreachable(system_ca, "the test's CA", "not signed by a CA this system trusts");
}

TEST_F(EtcdTlsTest, TlsOptionsThatCannotWorkAreRefusedUpFront) {
  const auto endpoints = parse_etcd_endpoints(etcd_->endpoints());
  auto cert_only = trusted();
  cert_only.key_file.clear();
  test::expect_error_from([&] { EtcdStore store(endpoints, cert_only); }, ErrorCode::usage, "go together");
  auto missing = trusted();
  missing.ca_file = dir_->file("nowhere.pem");
  test::expect_error_from([&] { EtcdStore store(endpoints, missing); }, ErrorCode::usage,
                          "etcd's CA file: " + missing.ca_file + ": cannot open for reading");
  auto garbage = trusted();
  garbage.cert_file = dir_->write("garbage.pem", "not a certificate\n");
  test::expect_error_from([&] { EtcdStore store(endpoints, garbage); }, ErrorCode::usage, "cannot be loaded as PEM");
  auto not_a_ca = trusted();
  not_a_ca.ca_file = dir_->write("not-a-ca.pem", "not a certificate\n");
  test::expect_error_from([&] { EtcdStore store(endpoints, not_a_ca); }, ErrorCode::usage, "holds no PEM certificate");
  // The same checks without a store, as `serve --cluster-etcd` makes them before loading its model.
  test::expect_error_from([&] { check_etcd_options(endpoints, not_a_ca); }, ErrorCode::usage, "holds no PEM certificate");
  auto mismatched = trusted();
  mismatched.key_file = pki_->server_key;  // the server's key with the client's certificate
  test::expect_error_from([&] { EtcdStore store(endpoints, mismatched); }, ErrorCode::usage, "do not match");
  test::expect_error_from([&] { EtcdStore store(parse_etcd_endpoints("http://127.0.0.1:2379"), trusted()); },
                          ErrorCode::usage, "for https:// members");
}

}  // namespace
}  // namespace gpucap::cluster
