// The parts of HTTP that cpp-httplib 0.11 handles in ways a network service cannot keep, tried as a
// client would: a Range header (an answer of n copies of the body), Accept-Encoding (answers
// compressed for clients that then cannot read them), framing that two HTTP readers could read two
// ways (request smuggling), headers over the limit whose end came in the same read, a body that
// waited for a worker, and log lines a path could forge. Real sockets on 127.0.0.1.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "service/guarded_server_support.hpp"

namespace gpucap::service {
namespace {

using namespace guarded_test;

constexpr auto npos = std::string::npos;

// A list of n ranges made cpp-httplib build n copies of the body in memory (2 KB of "-," asked
// 200 MB of a 200-KB page), and gzip or br was what Triton's asyncio client asks for and then reads
// as JSON without inflating it: every answer goes out whole and as it is, errors too.
TEST(GuardedServer, EveryAnswerGoesOutWholeAndUncompressedWhateverTheClientAsks) {
  TestServer server(small_limits());
  Socket client(server.port());
  ASSERT_TRUE(client.send("GET /hello HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\n\r\n"));
  const auto one_range = receive_answer(client, 3s);
  EXPECT_EQ(status_of(one_range), 200) << one_range;
  EXPECT_TRUE(one_range.ends_with("\r\n\r\nhi")) << one_range;
  ASSERT_TRUE(client.send("GET /hello HTTP/1.1\r\nHost: x\r\nRange: bytes=-,-,-\r\nAccept-Encoding: gzip, deflate, br\r\n\r\n"));
  const auto hello = receive_answer(client, 3s);
  EXPECT_EQ(status_of(hello), 200) << hello;
  EXPECT_TRUE(hello.ends_with("\r\n\r\nhi")) << hello;
  for (const char* header : {"Content-Range", "Content-Encoding", "multipart"}) EXPECT_EQ(hello.find(header), npos) << hello;
  ASSERT_TRUE(client.send("GET /nothing HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nRange: bytes=0-3\r\n\r\n"));
  const auto missing = receive_answer(client, 3s);
  EXPECT_EQ(status_of(missing), 404) << missing;
  EXPECT_EQ(missing.find("Content-Encoding"), npos) << missing;
  EXPECT_NE(missing.find(R"({"error": "not found: try /hello"})"), npos) << missing;
}

// Two Content-Lengths that differ (cpp-httplib took the first), one that is not a number (it read
// 0), Transfer-Encoding beside Content-Length (it read chunked: an empty body, then the smuggled
// request), the same with the coding %-escaped (it decodes header values), whitespace before a
// colon or a folded line (it saw no length where the scan saw one), a bare LF (it reads another
// line than the scan): each is 400 and the connection closes, so the bytes after it — here a whole
// request — are never answered. A coding other than chunked is 501. First on a connection, or
// pipelined after a request.
TEST(GuardedServer, FramingThatTwoReadersCouldReadTwoWaysIsRefusedAndTheConnectionCloses) {
  EXPECT_TRUE(scan_request("GET / HTTP/1.1\r\nHost : x\r\n\r\n").bad_line);
  EXPECT_TRUE(scan_request("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n").bad_line);
  EXPECT_TRUE(scan_request("GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n").bad_line);
  EXPECT_FALSE(scan_request("GET / HTTP/1.1\r\nHost: x\r\n\r\n").bad_line);
  EXPECT_TRUE(scan_request("POST / HTTP/1.1\r\nTransfer-Encoding: %63hunked\r\n\r\n").chunked);
  EXPECT_TRUE(scan_request("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n").unsupported_coding);
  TestServer server(small_limits());
  const std::string smuggled = get_hello();
  const std::string chunked_body = "0\r\n\r\n" + smuggled;  // an empty chunked body, then a request
  const auto length = std::to_string(smuggled.size());
  const auto chunked_length = std::to_string(chunked_body.size());
  const struct {
    std::string framing;
    std::string body;
    int status;
  } cases[] = {
      {"Content-Length: 0\r\nContent-Length: " + length, smuggled, 400},
      {"Content-Length: 3x", smuggled, 400},
      {"Transfer-Encoding: chunked\r\nContent-Length: " + chunked_length, chunked_body, 400},
      {"Transfer-Encoding: %63hunked\r\nContent-Length: " + chunked_length, chunked_body, 400},
      {"Content-Length : " + length, smuggled, 400},
      {"X-Folded: a\r\n b\r\nContent-Length: " + length, smuggled, 400},
      {"X-Bare: a\nContent-Length: 0\r\nContent-Length: " + length, smuggled, 400},
      {"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked", chunked_body, 501},
  };
  for (const auto& c : cases) {
    const std::string request = "POST /echo HTTP/1.1\r\nHost: x\r\n" + c.framing + "\r\n\r\n" + c.body;
    for (const bool pipelined : {false, true}) {
      Socket client(server.port());
      ASSERT_TRUE(client.send((pipelined ? get_hello() : std::string()) + request));
      const auto got = client.receive(3s);  // until the server closes
      EXPECT_EQ(answers_in(got), pipelined ? 2U : 1U) << c.framing << ": " << got;
      EXPECT_NE(got.find(fmt::format("HTTP/1.1 {}", c.status)), npos) << c.framing << ": " << got;
    }
  }
  Socket other(server.port());
  ASSERT_TRUE(other.send(get_hello()));
  EXPECT_EQ(status_of(other.receive(3s, 12)), 200);
}

// The limit held only while the blank line had not come: headers over it that arrived with their
// end in one read were answered, pipelined ones too.
TEST(GuardedServer, HeadersOverTheLimitAre431AlsoWhenTheirEndCameInTheSameRead) {
  auto limits = small_limits();
  limits.max_header_bytes = 4096;
  TestServer server(limits);
  const std::string large = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Padding: " + std::string(6000, 'a') + "\r\n\r\n";
  for (const bool pipelined : {false, true}) {
    Socket client(server.port());
    ASSERT_TRUE(client.send((pipelined ? get_hello() : std::string()) + large));
    const auto got = client.receive(3s);  // until the server closes
    EXPECT_NE(got.find("HTTP/1.1 431"), npos) << got;
    EXPECT_EQ(answers_in(got), pipelined ? 2U : 1U) << got;
  }
}

// A request's deadline runs from its first byte, but a body the server has not begun to read while
// its client went on sending is not late by the client's doing: a 200-KB body (read by the worker,
// not collected) that waited 2 s for the one worker, longer than the whole request's 1.5 s, gets a
// grace to be read, and is answered.
TEST(GuardedServer, TheTimeARequestWaitsForAWorkerDoesNotCountAgainstItsBody) {
  auto limits = small_limits();
  limits.workers = 1;
  TestServer server(limits);
  Socket busy(server.port());
  ASSERT_TRUE(busy.send("GET /sleep?ms=2000 HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::this_thread::sleep_for(200ms);  // the one worker is in it
  Socket waiting(server.port());
  const std::string body(std::size_t{200} << 10U, 'b');
  std::thread sender([&] {
    EXPECT_TRUE(waiting.send(fmt::format("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", body.size()) + body));
  });
  const auto answer = receive_answer(waiting, 8s);
  sender.join();
  EXPECT_EQ(status_of(answer), 200) << answer;
  EXPECT_TRUE(answer.ends_with("\r\n\r\n" + std::to_string(body.size()))) << answer;
  EXPECT_EQ(status_of(receive_answer(busy, 3s)), 200);
}

// cpp-httplib decodes %0A in a path: written as it came, a refused request's path could start a
// forged log line, or move a terminal's cursor with an escape sequence.
TEST(GuardedServer, ARefusalsLogLineShowsTheClientsControlCharactersEscaped) {
  const CapturedLog log;
  TestServer server(small_limits());
  Socket client(server.port());
  ASSERT_TRUE(client.send("GET /x%0A[forged]%1B[2J HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(status_of(receive_answer(client, 3s)), 404);
  const std::string shown = R"(test: 404 GET /x\x0a[forged]\x1b[2J from 127.0.0.1:)";
  // The line is written after the answer is sent: it may come a little after the client has it.
  for (int i = 0; i < 200 && !has_line(log.lines(), shown); ++i) std::this_thread::sleep_for(10ms);
  const auto lines = log.lines();
  EXPECT_TRUE(has_line(lines, shown)) << fmt::format("{}", fmt::join(lines, "\n"));
  EXPECT_FALSE(has_line(lines, "\n[forged]"));  // each line ends in its own newline
  EXPECT_FALSE(has_line(lines, "\x1b"));
}

}  // namespace
}  // namespace gpucap::service
