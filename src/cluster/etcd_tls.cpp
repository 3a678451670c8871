#include "etcd_tls.hpp"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <pthread.h>

#include <algorithm>
#include <ctime>

#include "gpucap/core/files.hpp"

namespace gpucap::cluster::detail {
namespace {

// A TLS file must be there before anything is sent: a bad path is the user's to fix (usage).
std::string read_tls_file(const std::string& path, const char* what) {
  if (path.empty()) return {};
  std::string content;
  try {
    content = read_text_file(path);
  } catch (const gpucap::Error& e) {
    throw usage_error(fmt::format("{}: {}", what, e.what()));
  }
  if (content.empty()) throw usage_error(fmt::format("{}: {} is empty", what, path));
  return content;
}

// The CA file holds at least one PEM certificate (cpp-httplib would only fail at the first call).
void check_ca_file(const std::string& path) {
  const auto content = read_tls_file(path, "etcd's CA file");
  if (content.empty()) return;
  const std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(content.data(), static_cast<int>(content.size())),
                                                      &BIO_free);
  const std::unique_ptr<X509, decltype(&X509_free)> cert(
      bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, &X509_free);
  ERR_clear_error();  // nothing of this check may be read as a later call's error
  if (!cert) throw usage_error(fmt::format("etcd's CA file: {} holds no PEM certificate", path));
}

sigset_t sigpipe_only() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

}  // namespace

// A client for one member: plain HTTP, or TLS with the options' CA (the system's when none is
// given) and this client's certificate, if any.
std::unique_ptr<httplib::Client> member_client(const ServerUrl& endpoint, const EtcdOptions& options) {
  auto client = std::make_unique<httplib::Client>(endpoint.scheme_host_port, options.cert_file, options.key_file);
  if (!options.ca_file.empty()) client->set_ca_cert_path(options.ca_file);
  return client;
}

void check_tls(const std::vector<ServerUrl>& endpoints, const EtcdOptions& options) {
  check_ca_file(options.ca_file);
  (void)read_tls_file(options.cert_file, "the etcd client certificate");
  (void)read_tls_file(options.key_file, "the etcd client key");
  if (options.cert_file.empty() != options.key_file.empty()) {
    throw usage_error("an etcd client certificate and its key go together: give both or neither");
  }
  const bool tls_files = !options.ca_file.empty() || !options.cert_file.empty();
  const auto https = std::find_if(endpoints.begin(), endpoints.end(),
                                  [](const ServerUrl& e) { return e.scheme_host_port.starts_with("https://"); });
  if (tls_files && https == endpoints.end()) {
    throw usage_error("etcd's CA, client certificate and key are for https:// members; every member given is http://");
  }
  // OpenSSL loads the certificate, the key and whether they match when a TLS client is made.
  if (https != endpoints.end() && !member_client(*https, options)->is_valid()) {
    throw usage_error(fmt::format("the client certificate '{}' and key '{}' cannot be loaded as PEM, or do not match",
                                  options.cert_file, options.key_file));
  }
}

std::string tls_hint(httplib::Error transport_error, const EtcdOptions& options) {
  using httplib::Error;
  if (transport_error == Error::SSLServerVerification) {
    return options.ca_file.empty() ? " (its certificate is not signed by a CA this system trusts: give etcd's CA)"
                                   : " (its certificate is not signed by the CA given, or does not name this host)";
  }
  if (transport_error == Error::SSLConnection) {
    return options.cert_file.empty() ? " (the TLS handshake failed: a member that asks for a client certificate needs "
                                       "one, with its key)"
                                     : " (the TLS handshake failed: is the client certificate signed by a CA etcd trusts?)";
  }
  // Under TLS 1.3 a member that refuses the client's certificate (or its absence) says so after the
  // handshake: the first read or write fails. So may a member that stops, hence "maybe".
  if (transport_error == Error::Write || transport_error == Error::Read) {
    return options.cert_file.empty() ? " (maybe a member that asks for a client certificate: give one, with its key)"
                                     : " (maybe the member refused the client certificate: is it signed by a CA etcd "
                                       "trusts?)";
  }
  return "";
}

NoSigpipe::NoSigpipe() {
  pending_before_ = sigpipe_pending();
  const auto set = sigpipe_only();
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
}

NoSigpipe::~NoSigpipe() {
  if (!pending_before_ && sigpipe_pending()) {
    const auto set = sigpipe_only();
    const timespec now{};
    (void)sigtimedwait(&set, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace gpucap::cluster::detail
