#include "support/test_pki.hpp"

#include <stdexcept>
#include <sys/wait.h>
#include <vector>

#include "support/child_process.hpp"

namespace gpucap::test {
namespace {

void openssl(std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), "/usr/bin/openssl");
  ChildProcess child(arguments, /*merge_stderr=*/true);
  while (child.read_line(30.0)) {
  }
  const auto status = child.wait(30.0);
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    std::string command;
    for (const auto& word : arguments) command += word + " ";
    throw std::runtime_error("openssl failed: " + command);
  }
}

// A self-signed CA named `name`: DIR/name.crt and DIR/name.key.
void make_ca(const TempDir& dir, const std::string& name) {
  openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
           "/CN=" + name, "-keyout", dir.file(name + ".key"), "-out", dir.file(name + ".crt")});
}

// DIR/name.crt and DIR/name.key, signed by the CA `ca`, with the extensions in `extensions`.
void make_leaf(const TempDir& dir, const std::string& name, const std::string& ca, const std::string& extensions) {
  const auto ext = dir.write(name + ".ext", extensions + "\n");
  openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=" + name,
           "-keyout", dir.file(name + ".key"), "-out", dir.file(name + ".csr")});
  openssl({"x509", "-req", "-days", "1", "-in", dir.file(name + ".csr"), "-CA", dir.file(ca + ".crt"), "-CAkey",
           dir.file(ca + ".key"), "-CAcreateserial", "-extfile", ext, "-out", dir.file(name + ".crt")});
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
