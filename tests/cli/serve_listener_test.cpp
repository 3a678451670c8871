// serve's listener dies while it serves (issue 36, faults): accept() fails on its socket with an
// error that is not the open-file limit (cpp-httplib waits out EMFILE and gives up on the rest).
// serve must then drain as at SIGTERM — every request it admitted answered, every setting put back,
// the summary printed — and exit non-zero with one error line, so that a supervisor restarts it
// rather than it staying up with no way in.
//
// Provoked for real, from outside the process: the test takes a copy of serve's listening socket
// (pidfd_getfd, Linux 5.6; it needs the right to ptrace the child, which its parent has unless a
// security module forbids it) and shuts it down, after which accept() fails with EINVAL.

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/serve_child.hpp"

namespace gpucap {
namespace {

// The inode of the socket listening on 127.0.0.1:port (/proc/net/tcp, state 0A), "" if none.
std::string listening_socket_inode(int port) {
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the header
  char local_port[16];
  std::snprintf(local_port, sizeof local_port, ":%04X", port);
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state == "0A" && local.size() > 5 && local.compare(local.size() - 5, 5, local_port) == 0) return inode;
  }
  return {};
}

// Shuts down the socket process `pid` listens on at `port`; an explanation when it cannot.
std::optional<std::string> shut_down_listener_of(pid_t pid, int port) {
  const auto inode = listening_socket_inode(port);
  if (inode.empty()) return "no socket listens on port " + std::to_string(port);
  int target_fd = -1;
  std::error_code listing;
  std::filesystem::directory_iterator files("/proc/" + std::to_string(pid) + "/fd", listing);
  if (listing) return "cannot list the child's files: " + listing.message();
  for (const auto& entry : files) {
    std::error_code error;
    if (std::filesystem::read_symlink(entry.path(), error).string() == "socket:[" + inode + "]") {
      target_fd = std::stoi(entry.path().filename().string());
    }
  }
  if (target_fd < 0) return "the listening socket is not among the child's files";
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return std::string("pidfd_open: ") + std::strerror(errno);
  const int copy = static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, target_fd, 0));
  const int copy_errno = errno;
  ::close(pidfd);
  if (copy < 0) return std::string("pidfd_getfd: ") + std::strerror(copy_errno);
  const int shut = ::shutdown(copy, SHUT_RDWR);
  ::close(copy);
  if (shut != 0) return std::string("shutdown: ") + std::strerror(errno);
  return std::nullopt;
}

TEST(ServeListener, AListenerThatDiesDrainsAnswersWhatItAdmittedAndExitsNonZero) {
  // Batches of NASNet-A Large on the P40 under 90 W take a quarter of a second: requests are still
  // queued or running when the listener dies.
  test::Server server({"--gpu", "p40", "--model", "nasnet_a_large", "--power-cap", "90", "--slo-ms", "5000", "--json",
                       "--metrics", "127.0.0.1:0"},
                      /*merge_stderr=*/true);
  ASSERT_TRUE(server.started());
  const int port = server.port();
  const std::vector<float> image(3 * 331 * 331, 0.1F);
  const auto [body, header_length] = test::binary_request(image, {1, 3, 331, 331});
  std::vector<std::future<int>> answers;
  for (int i = 0; i < 8; ++i) {
    answers.push_back(std::async(std::launch::async, [port, &body = body, header_length = header_length] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(30);
      const httplib::Headers headers{{"Inference-Header-Content-Length", std::to_string(header_length)}};
      const auto r = c.Post("/v2/models/nasnet_a_large/infer", headers, body, "application/octet-stream");
      return r ? r->status : -1;
    }));
  }
  // Every request admitted (pending) or answered before the listener dies.
  ASSERT_GE(server.wait_until_admitted("nasnet_a_large", 8, 20.0), 8.0) << "the eight requests were not all admitted within 20 s";
  // Some are still waiting for their answer when the listener dies: the drain is what answers them.
  const auto waiting = std::count_if(answers.begin(), answers.end(), [](const std::future<int>& a) {
    return a.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  });
  if (const auto why = shut_down_listener_of(server.process().pid(), port)) {
    for (auto& a : answers) (void)a.get();
    GTEST_SKIP() << "cannot reach serve's listening socket from here: " << *why;
  }
  EXPECT_GT(waiting, 0) << "every request was answered before the listener died";
  for (auto& a : answers) EXPECT_EQ(a.get(), 200);
  const auto status = server.process().wait(30.0);
  ASSERT_TRUE(status.has_value()) << "serve did not end after its listener died";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 4) << "the I/O exit code";
  std::string rest;
  while (const auto line = server.process().read_line(5.0)) rest += *line + "\n";
  EXPECT_NE(rest.find("gpucap serve: the inference API's listener failed: draining"), std::string::npos) << rest;
  EXPECT_NE(rest.find("gpucap: error: the inference server stopped accepting connections: accept() failed on its "
                      "socket\n"),
            std::string::npos)
      << rest;
  const auto summary = rest.find('{');
  ASSERT_NE(summary, std::string::npos) << rest;
  const auto json = nlohmann::json::parse(rest.substr(summary, rest.rfind('}') - summary + 1));
  EXPECT_EQ(json["answered"], 8) << rest;
}

}  // namespace
}  // namespace gpucap
