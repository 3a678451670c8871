// What the server refuses on a request's headers, and what it answers at shutdown: bodies with a
// Content-Encoding, a POST without a length, a form-encoded body (which cpp-httplib alone caps at
// 8 KiB), a request still arriving when the server stops. Real sockets on 127.0.0.1.
#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "service/guarded_server_support.hpp"
#include "support/thread_stack_probe.hpp"

namespace gpucap::service {
namespace {

using namespace guarded_test;

// cpp-httplib inflates a gzip or br body with no bound (a 400-KB gzip body took 400 MB): a body
// with a Content-Encoding is refused on its headers, first on a connection or pipelined after
// another request (which a worker reads), and the server goes on.
TEST(GuardedServer, ABodyWithAContentEncodingIsRefusedWith415) {
  EXPECT_TRUE(scan_request("POST / HTTP/1.1\r\ncontent-encoding: gzip\r\n\r\n").encoded);
  EXPECT_FALSE(scan_request("POST / HTTP/1.1\r\nContent-Encoding: Identity\r\n\r\n").encoded);
  TestServer server(small_limits());
  const std::string gzip_post = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc";
  {
    Socket client(server.port());
    ASSERT_TRUE(client.send(gzip_post));
    const auto answer = client.receive(3s);
    EXPECT_EQ(status_of(answer), 415) << answer;
    EXPECT_NE(answer.find("Content-Encoding"), std::string::npos) << answer;
  }
  {
    // Pipelined behind another request (a worker reads it), with a body that is itself a request:
    // the body is never parsed as one (no third answer), and the connection closes after the 415.
    Socket client(server.port());
    const std::string smuggled = get_hello();
    ASSERT_TRUE(client.send(get_hello() + "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: " +
                            std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled));
    const auto got = client.receive(3s);  // until the server closes
    EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
    EXPECT_NE(got.find("HTTP/1.1 415"), std::string::npos) << got;
    EXPECT_EQ(answers_in(got), 2U) << got;
  }
  Socket client(server.port());
  ASSERT_TRUE(client.send(get_hello()));
  EXPECT_EQ(status_of(client.receive(3s, 12)), 200);
}

// A POST that says neither its length nor that it is chunked would be read until the client closes
// (a worker held until the deadline, then 408): 411 at once, first on a connection or pipelined.
TEST(GuardedServer, APostWithoutALengthIs411AtOnce) {
  TestServer server(small_limits());
  const std::string no_length = "POST /echo HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const auto& sent : {no_length, get_hello() + no_length}) {
    Socket client(server.port());
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(client.send(sent));
    const auto answer = client.receive(3s);  // until the server closes
    EXPECT_NE(answer.find("HTTP/1.1 411"), std::string::npos) << answer;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  }
  Socket other(server.port());
  ASSERT_TRUE(other.send(get_hello()));
  EXPECT_EQ(status_of(other.receive(3s, 12)), 200);
}

// No API here takes files: a multipart body is 415, not an internal error, and the connection
// closes after it (its parts are not read).
TEST(GuardedServer, AMultipartBodyIs415) {
  TestServer server(small_limits());
  Socket client(server.port());
  const std::string body = "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--b--\r\n";
  ASSERT_TRUE(client.send(get_hello() + "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  const auto got = client.receive(3s);
  EXPECT_NE(got.find("HTTP/1.1 415"), std::string::npos) << got;
  EXPECT_NE(got.find("multipart"), std::string::npos) << got;
  EXPECT_EQ(answers_in(got), 2U) << got;
}

// curl -d sends application/x-www-form-urlencoded, whose bodies cpp-httplib alone refuses over
// 8 KiB: a route reads its body whatever its type (collected, or read by a worker).
TEST(GuardedServer, AFormEncodedBodyIsReadWhateverItsSize) {
  TestServer server(small_limits());
  for (const std::size_t size : {std::size_t{20000}, std::size_t{200000}}) {
    Socket client(server.port());
    ASSERT_TRUE(client.send(fmt::format("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                                        "Connection: close\r\nContent-Length: {}\r\n\r\n{}",
                                        size, std::string(size, 'x'))));
    const auto answer = client.receive(3s);
    EXPECT_EQ(status_of(answer), 200) << answer;
    EXPECT_NE(answer.find("\r\n\r\n" + std::to_string(size)), std::string::npos) << answer;
  }
}

// At shutdown a request that is still arriving is answered 503, not cut off without a word; an
// idle keep-alive connection is just closed.
TEST(GuardedServer, ARequestStillArrivingAtShutdownIsAnswered503) {
  auto server = std::make_unique<TestServer>(small_limits());
  Socket half(server->port());
  Socket idle(server->port());
  ASSERT_TRUE(half.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"));
  ASSERT_TRUE(idle.send(get_hello()));
  EXPECT_EQ(status_of(idle.receive(3s, 12)), 200);
  std::this_thread::sleep_for(100ms);  // the half request's bytes are read
  server.reset();
  const auto answer = half.receive(3s);
  EXPECT_EQ(status_of(answer), 503) << answer;
  EXPECT_NE(answer.find("shutting down"), std::string::npos) << answer;
  const auto after = idle.receive(1s);
  EXPECT_EQ(after.find("HTTP/1.1"), std::string::npos) << after;
}

// The system refuses a worker thread (a limit on threads or memory): the request that needed it is
// answered 503 and the server goes on; once threads can start again the next request is served.
// Provoked for real: every thread started without attributes gets a 1-TiB stack, which cannot be
// mapped, so std::thread fails with EAGAIN as it does under a thread or memory limit.
TEST(GuardedServer, ARequestNoWorkerCanBeStartedForIsAnswered503AndTheServerGoesOn) {
  if (test::thread_stack_can_be_mapped(test::kUnmappableStackBytes)) {
    GTEST_SKIP() << "this machine maps a 1-TiB thread stack (vm.overcommit_memory = 1?): it stands for no limit here";
  }
  TestServer server(small_limits());
  {
    // The server's waiting thread starts with its listener, after is_running(): a POST without a
    // length is answered 411 by that thread itself, so once it is answered the thread is up, and
    // no worker has started yet.
    Socket client(server.port());
    ASSERT_TRUE(client.send("POST /echo HTTP/1.1\r\nHost: x\r\n\r\n"));
    const auto answer = client.receive(3s);
    ASSERT_EQ(status_of(answer), 411) << answer;
  }
  {
    // The process's default thread stack, 1 TiB while it lives; the old one back however the
    // block ends.
    struct DefaultStack {
      std::size_t normal_bytes = 0;
      static int set(std::size_t bytes) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, bytes);
        const int rc = pthread_setattr_default_np(&attr);
        pthread_attr_destroy(&attr);
        return rc;
      }
      DefaultStack() {
        pthread_attr_t normal;
        pthread_getattr_default_np(&normal);
        pthread_attr_getstacksize(&normal, &normal_bytes);
        pthread_attr_destroy(&normal);
        EXPECT_EQ(set(test::kUnmappableStackBytes), 0);
      }
      ~DefaultStack() { set(normal_bytes); }
      DefaultStack(const DefaultStack&) = delete;
      DefaultStack& operator=(const DefaultStack&) = delete;
    } const unmappable;
    Socket client(server.port());
    ASSERT_TRUE(client.send(get_hello()));
    const auto refused = client.receive(3s);
    EXPECT_EQ(status_of(refused), 503) << refused;
    EXPECT_NE(refused.find("could not start a thread"), std::string::npos) << refused;
  }
  Socket client(server.port());
  ASSERT_TRUE(client.send(get_hello()));
  EXPECT_EQ(status_of(client.receive(3s, 12)), 200);
}

}  // namespace
}  // namespace gpucap::service
