#pragma once
// A throw-away certificate authority for TLS tests, made with Debian's `openssl` command in a
// temporary folder: a CA, a server certificate for 127.0.0.1 and localhost, and a client
// certificate, each signed by the CA (EC P-256 keys, valid for a day).

#include <string>

#include "support/paths.hpp"

namespace gpucap::test {

struct TestPki {
  std::string ca_cert;
  std::string server_cert;
  std::string server_key;
  std::string client_cert;
  std::string client_key;
  std::string other_ca_cert;  // a second CA that signed nothing here: a client trusting it must refuse the server
};

// Throws std::runtime_error when openssl is missing or fails.
[[nodiscard]] TestPki make_test_pki(const TempDir& dir);

}  // namespace gpucap::test
