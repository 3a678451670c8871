#pragma once
// A PostgreSQL server of the test's own: initdb and pg_ctl (Debian's postgresql package, which
// scripts/setup.sh installs) in a temporary folder, listening on 127.0.0.1 and a free port only,
// its socket in that folder. Run as `nobody` when the tests run as root (PostgreSQL refuses
// root). Stopped (immediate) and deleted at the end. Missing binaries are a failure, not a skip.
// The cluster is a copy of one initdb made once in the build folder (GPUCAP_TEST_PG_TEMPLATE_DIR).

#include <string>

namespace gpucap::test {

class PrivatePostgres {
 public:
  // Throws std::runtime_error with what went wrong (and the server's log) when it cannot start.
  PrivatePostgres();
  ~PrivatePostgres();
  PrivatePostgres(const PrivatePostgres&) = delete;
  PrivatePostgres& operator=(const PrivatePostgres&) = delete;

  // A new, empty database; its libpq URI.
  [[nodiscard]] std::string new_database();
  [[nodiscard]] int port() const { return port_; }

  // Stops the server at once, as a crash would (pg_ctl -m immediate); its data stays.
  void crash();
  // Starts it again on the same port and data (PostgreSQL's crash recovery runs first).
  void restart();

 private:
  void start();
  void start_server();
  void copy_template_cluster();
  void hand_to_owner(const std::string& dir) const;
  void run_as_owner(const std::string& dir, const std::string& command) const;

  std::string bin_dir_;
  std::string dir_;
  int port_ = 0;
  int databases_ = 0;
  bool started_ = false;
};

// One server per test process, started on first use and stopped at exit.
PrivatePostgres& private_postgres();

}  // namespace gpucap::test
