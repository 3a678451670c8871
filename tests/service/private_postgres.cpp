#include "service/private_postgres.hpp"

#include <pwd.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "support/cli_runner.hpp"
#include "support/free_port.hpp"

namespace gpucap::test {
namespace {

// Debian's layout: /usr/lib/postgresql/<major>/bin; the newest there.
std::string find_bin_dir() {
  const std::filesystem::path root = "/usr/lib/postgresql";
  std::string best;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const auto bin = entry.path() / "bin";
    if (std::filesystem::exists(bin / "initdb") && std::filesystem::exists(bin / "pg_ctl") && bin.string() > best) best = bin.string();
  }
  if (best.empty()) {
    throw std::runtime_error(
        "PostgreSQL's server binaries (initdb, pg_ctl) are missing under /usr/lib/postgresql/*/bin: install the "
        "postgresql package (scripts/setup.sh does)");
  }
  return best;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// In memory where there is a tmpfs: copying the cluster's 40 MB of small files to disk takes a
// second of a test's time, to /dev/shm a twentieth of that.
std::filesystem::path scratch_dir() {
  if (std::filesystem::is_directory("/dev/shm") && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

}  // namespace

PrivatePostgres::PrivatePostgres() : bin_dir_(find_bin_dir()) {
  std::string pattern = (scratch_dir() / "gpucap-pg-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  try {
    start();
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

void PrivatePostgres::start() {
  hand_to_owner(dir_);
  copy_template_cluster();
  // The port is free when picked; another process may take it before the server binds, so a
  // failed start is tried again on another port.
  for (int attempt = 0; attempt < 3 && !started_; ++attempt) {
    port_ = free_port();
    try {
      start_server();
    } catch (const std::runtime_error&) {
      if (attempt == 2) throw std::runtime_error("PostgreSQL did not start:\n" + read_file(dir_ + "/server.log"));
    }
  }
}

void PrivatePostgres::start_server() {
  const auto options = "-p " + std::to_string(port_) + " -k " + dir_ +
                       " -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300";
  run_as_owner(dir_, quote(bin_dir_ + "/pg_ctl") + " -D " + quote(dir_ + "/data") + " -l " + quote(dir_ + "/server.log") +
                         " -w -t 60 -o " + quote(options) + " start >/dev/null 2>&1");
  started_ = true;
}

void PrivatePostgres::crash() {
  run_as_owner(dir_, quote(bin_dir_ + "/pg_ctl") + " -D " + quote(dir_ + "/data") + " -m immediate -w stop >/dev/null 2>&1");
  started_ = false;
}

void PrivatePostgres::restart() {
  try {
    start_server();
  } catch (const std::runtime_error&) {
    throw std::runtime_error("PostgreSQL did not start again:\n" + read_file(dir_ + "/server.log"));
  }
}

// initdb takes a second, and ctest runs every test in a process of its own: the first process
// makes a cluster in the build folder (one per PostgreSQL major version, under a file lock so
// that parallel tests make it once) and every server starts from a copy of it.
void PrivatePostgres::copy_template_cluster() {
  const auto cache = std::string(GPUCAP_TEST_PG_TEMPLATE_DIR) + "/" + std::filesystem::path(bin_dir_).parent_path().filename().string();
  std::filesystem::create_directories(cache);
  const int lock = ::open((cache + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + cache + ".lock");
  try {
    if (!std::filesystem::exists(cache + "/ready")) {
      std::filesystem::remove_all(cache + "/data");
      hand_to_owner(cache);
      run_as_owner(cache, quote(bin_dir_ + "/initdb") + " -D " + quote(cache + "/data") +
                              " -U postgres -A trust -E UTF8 --locale=C -N >" + quote(cache + "/initdb.log") + " 2>&1");
      std::ofstream(cache + "/ready") << "initdb done\n";
    }
    run_as_owner(dir_, "cp -a " + quote(cache + "/data") + " " + quote(dir_ + "/data"));
  } catch (...) {
    ::close(lock);
    throw;
  }
  ::close(lock);
}

void PrivatePostgres::hand_to_owner(const std::string& dir) const {
  if (::geteuid() != 0) return;
  const passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr || ::chown(dir.c_str(), nobody->pw_uid, nobody->pw_gid) != 0) {
    throw std::runtime_error("running as root, but cannot hand " + dir + " to user nobody for PostgreSQL");
  }
}

PrivatePostgres::~PrivatePostgres() {
  if (started_) {
    try {
      run_as_owner(dir_, quote(bin_dir_ + "/pg_ctl") + " -D " + quote(dir_ + "/data") + " -m immediate -w stop >/dev/null 2>&1");
    } catch (const std::exception&) {
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void PrivatePostgres::run_as_owner(const std::string& dir, const std::string& command) const {
  // From a folder of its own: `nobody` may not be allowed into the test's working directory.
  const auto as_owner = ::geteuid() == 0 ? "runuser -u nobody -- sh -c " + quote(command) : command;
  const auto full = "cd " + quote(dir) + " && " + as_owner;
  const int status = std::system(full.c_str());
  if (status != 0) {
    throw std::runtime_error("failed (" + std::to_string(status) + "): " + command + "\n" + read_file(dir + "/initdb.log"));
  }
}

std::string PrivatePostgres::new_database() {
  const auto name = "test" + std::to_string(++databases_);
  const auto command = quote(bin_dir_ + "/psql") + " -q -h 127.0.0.1 -p " + std::to_string(port_) +
                       " -U postgres -d postgres -c " + quote("CREATE DATABASE " + name) + " >/dev/null";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("cannot create database " + name);
  return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + name;
}

PrivatePostgres& private_postgres() {
  static PrivatePostgres server;
  return server;
}

}  // namespace gpucap::test
