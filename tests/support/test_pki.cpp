#include "support/test_pki.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

namespace gpucap::test {
namespace {

std::string quote(const std::string& path) { return "'" + path + "'"; }

void openssl(const std::string& arguments) {
  const auto command = "openssl " + arguments + " >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("openssl failed: " + command);
}

// A self-signed CA named `name`: DIR/name.crt and DIR/name.key.
void make_ca(const TempDir& dir, const std::string& name) {
  openssl(fmt::format("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN={} "
                      "-keyout {} -out {}",
                      name, quote(dir.file(name + ".key")), quote(dir.file(name + ".crt"))));
}

// DIR/name.crt and DIR/name.key, signed by the CA `ca`, with the extensions in `extensions`.
void make_leaf(const TempDir& dir, const std::string& name, const std::string& ca, const std::string& extensions) {
  const auto ext = dir.write(name + ".ext", extensions + "\n");
  openssl(fmt::format("req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN={} -keyout {} -out {}",
                      name, quote(dir.file(name + ".key")), quote(dir.file(name + ".csr"))));
  openssl(fmt::format("x509 -req -days 1 -in {} -CA {} -CAkey {} -CAcreateserial -extfile {} -out {}",
                      quote(dir.file(name + ".csr")), quote(dir.file(ca + ".crt")), quote(dir.file(ca + ".key")),
                      quote(ext), quote(dir.file(name + ".crt"))));
}

}  // namespace

TestPki make_test_pki(const TempDir& dir) {
  make_ca(dir, "ca");
  make_ca(dir, "other-ca");
  make_leaf(dir, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth");
  make_leaf(dir, "client", "ca", "extendedKeyUsage=clientAuth");
  return {dir.file("ca.crt"),     dir.file("server.crt"), dir.file("server.key"),
          dir.file("client.crt"), dir.file("client.key"), dir.file("other-ca.crt")};
}

}  // namespace gpucap::test
