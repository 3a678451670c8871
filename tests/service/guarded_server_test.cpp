// The HTTP server every gpucap service runs on, tried as an attacker would: bodies too large
// (chunked or not), clients that drip their headers or body, a thousand idle connections, the wrong
// method, a flood of bad requests. Real sockets on 127.0.0.1, bounded in count and time.
#include "gpucap/service/guarded_server.hpp"
#include "gpucap/service/inference_server.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "service/guarded_server_support.hpp"

namespace gpucap::service {
namespace {

using namespace guarded_test;

TEST(ScanRequest, FindsTheHeadersEndAndTheBodyFraming) {
  EXPECT_EQ(scan_request("GET / HTTP/1.1\r\nHost: x\r\n").header_bytes, 0U);
  const std::string head = "POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length:  12 \r\n\r\n";
  const auto scan = scan_request(head + "hello");
  EXPECT_EQ(scan.header_bytes, head.size());
  ASSERT_TRUE(scan.content_length);
  EXPECT_EQ(*scan.content_length, 12U);
  EXPECT_FALSE(scan.chunked);
  EXPECT_TRUE(scan_request("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n").chunked);
  EXPECT_TRUE(scan_request("POST / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").expect_continue);
  // Two lengths that differ, or one that is not a number, are not trusted (request smuggling).
  EXPECT_TRUE(scan_request("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n").malformed_length);
  EXPECT_TRUE(scan_request("POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n").malformed_length);
  EXPECT_FALSE(scan_request("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").malformed_length);
  // Whether the client closes the connection after the answer.
  EXPECT_FALSE(scan_request("GET / HTTP/1.1\r\nHost: x\r\n\r\n").client_closes);
  EXPECT_TRUE(scan_request("GET / HTTP/1.1\r\nconnection: Close\r\n\r\n").client_closes);
  EXPECT_TRUE(scan_request("GET / HTTP/1.0\r\nHost: x\r\n\r\n").client_closes);
  EXPECT_FALSE(scan_request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").client_closes);
}

TEST(ScanRequest, ARequestHasArrivedWithItsSmallBodyOrWhenAWorkerMustReadTheBody) {
  const std::string head = "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
  EXPECT_FALSE(request_arrived(scan_request(head + "12345"), head.size() + 5, 1024));
  EXPECT_TRUE(request_arrived(scan_request(head + "1234567890"), head.size() + 10, 1024));
  // Too large to collect: a worker reads it, under the request's deadline.
  EXPECT_TRUE(request_arrived(scan_request(head), head.size(), 4));
  EXPECT_TRUE(request_arrived(scan_request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 50, 1024));
  EXPECT_TRUE(request_arrived(scan_request("GET / HTTP/1.1\r\n\r\n"), 18, 1024));
  EXPECT_FALSE(request_arrived(scan_request("GET / HTTP/1.1\r\n"), 16, 1024));
}

TEST(GuardedServer, AnswersPipelinedRequestsOnOneConnection) {
  TestServer server(small_limits());
  Socket client(server.port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.send(get_hello() + "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc" + get_hello()));
  std::string got;
  const auto answers = [&got] {
    std::size_t count = 0;
    for (auto at = got.find("HTTP/1.1 200"); at != std::string::npos; at = got.find("HTTP/1.1 200", at + 1)) ++count;
    return count;
  };
  for (int i = 0; i < 20 && answers() < 3; ++i) got += client.receive(100ms);
  got += client.receive(100ms);
  EXPECT_EQ(answers(), 3U) << got;
  EXPECT_NE(got.find("\r\n\r\n3"), std::string::npos) << got;  // the echo of a 3-byte body
}

// Issue 38: a 300 MB chunked body was buffered whole before it was refused.
TEST(GuardedServer, AChunkedBodyIsHeldToTheBodyLimit) {
  TestServer server(small_limits());
  {
    Socket client(server.port());
    ASSERT_TRUE(client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
    const std::string chunk = fmt::format("{:x}\r\n{}\r\n", 64 << 10, std::string(64 << 10, 'x'));
    std::size_t sent = 0;
    timeval send_timeout{2, 0};
    setsockopt(client.fd(), SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    while (sent < (std::size_t{300} << 20) && !client.readable() && client.send(chunk)) sent += chunk.size();
    const auto answer = client.receive(3s);
    EXPECT_EQ(status_of(answer), 413) << answer.substr(0, 200);
    EXPECT_NE(answer.find("the body is too large"), std::string::npos) << answer.substr(0, 300);
    // Refused after about the limit (1 MiB, a quarter more for chunk framing, plus what the
    // sockets' buffers hold), not after 300 MB.
    EXPECT_LT(sent, std::size_t{16} << 20);
  }
  // A chunked body a little over the limit (within the framing allowance) is refused exactly.
  {
    Socket client(server.port());
    std::string body;
    for (int i = 0; i < 17; ++i) body += fmt::format("{:x}\r\n{}\r\n", 64 << 10, std::string(64 << 10, 'y'));
    ASSERT_TRUE(client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body + "0\r\n\r\n"));
    // One answer, then the connection closes: the rest of the body is not read as requests.
    const auto answer = client.receive(3s);
    EXPECT_EQ(status_of(answer), 413);
    EXPECT_EQ(answers_in(answer), 1U) << answer.substr(0, 400);
  }
  // Under the limit, chunked bodies are read whole.
  {
    Socket client(server.port());
    std::string body;
    for (int i = 0; i < 15; ++i) body += fmt::format("{:x}\r\n{}\r\n", 64 << 10, std::string(64 << 10, 'z'));
    ASSERT_TRUE(client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body + "0\r\n\r\n"));
    const auto answer = client.receive(3s);
    EXPECT_EQ(status_of(answer), 200) << answer;
    EXPECT_NE(answer.find(std::to_string(15 << 16)), std::string::npos) << answer;
  }
}

TEST(GuardedServer, AnAnnouncedBodyOverTheLimitIsRefusedAndTheAnswerArrives) {
  TestServer server(small_limits());
  Socket client(server.port());
  // The whole 2 MiB is sent, as clients do; the answer must not be lost to a reset.
  ASSERT_TRUE(client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n" + std::string(2 << 20, 'x')));
  const auto answer = client.receive(3s);
  EXPECT_EQ(status_of(answer), 413) << answer.substr(0, 200);
  EXPECT_NE(answer.find(R"({"error": "the body is too large)"), std::string::npos) << answer;
}

// Issue 38: a few hundred connections that drip their headers held every worker thread.
TEST(GuardedServer, ClientsThatDripTheirHeadersStarveNobodyAndAreCutAtTheDeadline) {
  TestServer server(small_limits());  // 4 workers, headers within 1 s
  std::vector<std::unique_ptr<Socket>> drippers;
  for (int i = 0; i < 300; ++i) {
    drippers.push_back(std::make_unique<Socket>(server.port()));
    ASSERT_TRUE(drippers.back()->connected());
    ASSERT_TRUE(drippers.back()->send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  }
  for (int i = 0; i < 3; ++i) {
    for (auto& dripper : drippers) dripper->send("a");
    std::this_thread::sleep_for(100ms);
  }
  // Meanwhile the others are answered at once.
  for (int i = 0; i < 20; ++i) {
    Socket client(server.port());
    const auto started = std::chrono::steady_clock::now();
    ASSERT_TRUE(client.send(get_hello()));
    const auto answer = client.receive(2s, 40);
    EXPECT_EQ(status_of(answer), 200) << answer;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 500ms);
  }
  // At the header deadline every dripper gets 408 and its connection is closed.
  int timed_out = 0;
  for (auto& dripper : drippers) timed_out += status_of(dripper->receive(3s, 12)) == 408 ? 1 : 0;
  EXPECT_EQ(timed_out, 300);
  drippers.clear();
  for (int i = 0; i < 100 && server.http().open_connections() > 0; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(server.http().open_connections(), 0U);
}

TEST(GuardedServer, ABodyThatDoesNotArriveInTimeIs408WhetherCollectedOrReadByAWorker) {
  TestServer server(small_limits());  // the whole request within 1.5 s
  for (const std::size_t length : {std::size_t{100}, std::size_t{200} << 10}) {
    Socket client(server.port());
    const auto started = std::chrono::steady_clock::now();
    ASSERT_TRUE(client.send(fmt::format("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n0123456789", length)));
    const auto answer = client.receive(4s, 12);
    EXPECT_EQ(status_of(answer), 408) << length << ": " << answer;
    const auto took = std::chrono::steady_clock::now() - started;
    EXPECT_GT(took, 1200ms) << length;
    EXPECT_LT(took, 3s) << length;
  }
  // The workers are free again.
  Socket client(server.port());
  ASSERT_TRUE(client.send(get_hello()));
  EXPECT_EQ(status_of(client.receive(2s, 12)), 200);
}

TEST(GuardedServer, AKnownPathWithTheWrongMethodIs405WithAllow) {
  TestServer server(small_limits());
  httplib::Client client("127.0.0.1", server.port());
  const auto put = client.Put("/hello", "x", "text/plain");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 405);
  EXPECT_EQ(put->get_header_value("Allow"), "GET, HEAD");
  EXPECT_NE(put->body.find("method not allowed"), std::string::npos) << put->body;
  const auto get_echo = client.Get("/echo");
  ASSERT_TRUE(get_echo);
  EXPECT_EQ(get_echo->status, 405);
  EXPECT_EQ(get_echo->get_header_value("Allow"), "POST");
  const auto unknown = client.Get("/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(unknown->body.find("not found: try /hello"), std::string::npos) << unknown->body;
}

// Issue 38: refused requests left no log line.
TEST(GuardedServer, EveryRefusalLeavesOneLogLineAndAFloodIsRateLimited) {
  const CapturedLog log;
  TestServer server(small_limits());
  httplib::Client client("127.0.0.1", server.port());
  ASSERT_EQ(client.Put("/hello", "x", "text/plain")->status, 405);
  ASSERT_EQ(client.Get("/nothing")->status, 404);
  {
    Socket raw(server.port());
    ASSERT_TRUE(raw.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999999\r\n\r\n"));
    ASSERT_EQ(status_of(raw.receive(2s, 12)), 413);
  }
  for (int i = 0; i < 50 && log.lines().size() < 3; ++i) std::this_thread::sleep_for(10ms);
  auto lines = log.lines();
  EXPECT_TRUE(has_line(lines, "test: 405 PUT /hello from 127.0.0.1:")) << fmt::format("{}", fmt::join(lines, "\n"));
  EXPECT_TRUE(has_line(lines, "test: 404 GET /nothing from 127.0.0.1:")) << fmt::format("{}", fmt::join(lines, "\n"));
  EXPECT_TRUE(has_line(lines, "test: 413 POST /echo from 127.0.0.1:")) << fmt::format("{}", fmt::join(lines, "\n"));
  // A flood of 300 bad requests leaves at most the burst, and the next line says how many it left out.
  const auto flood_started = std::chrono::steady_clock::now();
  for (int i = 0; i < 300; ++i) client.Get("/nothing");
  const double flood_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - flood_started).count();
  const auto flooded = log.lines().size() - lines.size();
  EXPECT_LE(static_cast<double>(flooded), 50.0 + 20.0 * flood_s + 1.0);
  EXPECT_GE(flooded, 40U);
  std::this_thread::sleep_for(200ms);
  client.Get("/nothing");
  // The line is written after the answer is sent: it may come a little after the client has it.
  for (int i = 0; i < 200 && !has_line(log.lines(), "more refusals were not logged"); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(has_line(log.lines(), "more refusals were not logged"));
}

TEST(GuardedServer, AThousandIdleConnectionsHoldNoWorker) {
  auto limits = small_limits();
  limits.workers = 2;
  limits.idle_timeout_s = 30.0;
  limits.header_timeout_s = 30.0;
  TestServer server(limits);
  std::vector<std::unique_ptr<Socket>> idle;
  for (int i = 0; i < 1000; ++i) {
    idle.push_back(std::make_unique<Socket>(server.port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  // Half of them answered once and kept alive.
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(idle[static_cast<std::size_t>(i)]->send(get_hello()));
    ASSERT_EQ(status_of(idle[static_cast<std::size_t>(i)]->receive(2s, 12)), 200);
  }
  for (int i = 0; i < 100 && server.http().open_connections() < 1000; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.http().open_connections(), 1000U);
  httplib::Client client("127.0.0.1", server.port());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(client.Get("/hello")->status, 200);
}

TEST(GuardedServer, ConnectionsOverTheLimitAre503) {
  auto limits = small_limits();
  limits.max_connections = 5;
  TestServer server(limits);
  std::vector<std::unique_ptr<Socket>> open;
  for (int i = 0; i < 5; ++i) open.push_back(std::make_unique<Socket>(server.port()));
  for (int i = 0; i < 100 && server.http().open_connections() < 5; ++i) std::this_thread::sleep_for(10ms);
  Socket one_more(server.port());
  EXPECT_EQ(status_of(one_more.receive(2s, 12)), 503);
  open.clear();
  for (int i = 0; i < 100 && server.http().open_connections() > 0; ++i) std::this_thread::sleep_for(10ms);
  httplib::Client client("127.0.0.1", server.port());
  EXPECT_EQ(client.Get("/hello")->status, 200);
}

// Clients that send a request's headers and then its body slowly, or never, hold the worker that
// reads it until the request's deadline: with as many of them as workers, nobody else was answered
// until then. A quarter of the workers (here one of four) answer only requests that came whole.
TEST(GuardedServer, ClientsThatHoldTheirBodiesLeaveAWorkerForRequestsThatCameWhole) {
  TestServer server(small_limits());  // four workers, the whole request within 1.5 s
  std::vector<std::unique_ptr<Socket>> holding;
  for (int i = 0; i < 4; ++i) {
    holding.push_back(std::make_unique<Socket>(server.port()));
    ASSERT_TRUE(holding.back()->send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  }
  std::this_thread::sleep_for(200ms);  // three workers wait for those bodies, the fourth body for a worker
  Socket client(server.port());
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(client.send(get_hello()));
  EXPECT_EQ(status_of(client.receive(3s, 12)), 200);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);  // not after the holders' deadline
  for (const auto& socket : holding) EXPECT_EQ(status_of(socket->receive(6s, 12)), 408);
}

// Each connection is a file descriptor: past the open-file limit accept() fails and no 503 can be
// answered, so serve's connection limit is kept under it (the soft limit is often 1,024).
TEST(GuardedServer, ServesConnectionLimitStaysUnderTheOpenFileLimit) {
  struct SoftLimit {  // sets the soft limit, and puts the old one back however the test ends
    rlimit saved{};
    explicit SoftLimit(rlim_t soft) {
      getrlimit(RLIMIT_NOFILE, &saved);
      rlimit low = saved;
      low.rlim_cur = std::min(saved.rlim_max, soft);
      setrlimit(RLIMIT_NOFILE, &low);
    }
    ~SoftLimit() { setrlimit(RLIMIT_NOFILE, &saved); }
    SoftLimit(const SoftLimit&) = delete;
    SoftLimit& operator=(const SoftLimit&) = delete;
  } const limit(1024);
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  ASSERT_GT(now.rlim_cur, 640U) << "the hard limit on open files is too low for this test";
  EXPECT_EQ(connection_limit_within_open_files(8192, 640), now.rlim_cur - 640);
  EXPECT_EQ(connection_limit_within_open_files(100, 640), 100U);
  EXPECT_EQ(connection_limit_within_open_files(8192, 5000), 16U);  // never fewer than a few
}

}  // namespace
}  // namespace gpucap::service

namespace gpucap::service {
namespace {

// Refuses POST /busy with 429 and a Retry-After as soon as its headers are in; counts the asks.
struct BusyCheck {
  std::shared_ptr<std::atomic<int>> asked = std::make_shared<std::atomic<int>>(0);
  GuardedServer::EarlyCheck check() const {
    return [asked = asked](std::string_view method, std::string_view path, std::chrono::steady_clock::time_point) {
      ++*asked;
      std::optional<GuardedServer::EarlyAnswer> answer;
      if (method == "POST" && path == "/busy") answer = GuardedServer::EarlyAnswer{429, "busy", {{"Retry-After", "2"}}};
      return answer;
    };
  }
};

// The answer comes before the body is sent; the body is then read and dropped, and the same
// connection serves the next request (its length was announced).
TEST(GuardedServer, AnEarlyAnswerComesBeforeTheBodyAndTheConnectionGoesOn) {
  BusyCheck busy;
  TestServer server(small_limits(), busy.check());
  Socket client(server.port());
  ASSERT_TRUE(client.send("POST /busy?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n"));
  const auto answer = receive_answer(client, 3s);
  EXPECT_EQ(status_of(answer), 429) << answer;
  EXPECT_NE(answer.find("Retry-After: 2\r\n"), std::string::npos) << answer;
  EXPECT_NE(answer.find(R"({"error": "busy"})"), std::string::npos) << answer;
  EXPECT_EQ(answer.find("Connection: close"), std::string::npos) << answer;
  ASSERT_TRUE(client.send(std::string(300000, 'x') + get_hello()));
  const auto next = receive_answer(client, 3s);
  EXPECT_EQ(status_of(next), 200) << next;
  EXPECT_TRUE(next.ends_with("\r\n\r\nhi")) << next;
  // A request the check lets through is answered by its handler, body and all.
  ASSERT_TRUE(client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
  const auto echo = receive_answer(client, 3s);
  EXPECT_TRUE(echo.ends_with("\r\n\r\n5")) << echo;
  EXPECT_EQ(busy.asked->load(), 3);
}

// A body and the next request in the same packet: the body is dropped, the next is answered.
TEST(GuardedServer, AnEarlyAnsweredBodyThatCameWithTheNextRequestIsDroppedExactly) {
  BusyCheck busy;
  TestServer server(small_limits(), busy.check());
  Socket client(server.port());
  ASSERT_TRUE(client.send("POST /busy HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\nGET /no" + get_hello()));
  const auto answers = receive_answers(client, 2, 3s);
  ASSERT_EQ(answers.size(), 2U);
  EXPECT_EQ(status_of(answers[0]), 429) << answers[0];
  EXPECT_EQ(status_of(answers[1]), 200) << answers[1];
  EXPECT_TRUE(answers[1].ends_with("hi")) << answers[1];
}

// When the body's end cannot be known (chunked), the client may never send it (it waits for
// 100 Continue) or says it closes, the answer says Connection: close and the connection is closed
// after it.
TEST(GuardedServer, AnEarlyAnswerClosesTheConnectionWhenTheBodysEndIsNotKnown) {
  BusyCheck busy;
  TestServer server(small_limits(), busy.check());
  for (const std::string framing : {"Transfer-Encoding: chunked", "Content-Length: 10\r\nExpect: 100-continue",
                                     "Content-Length: 10\r\nConnection: close"}) {
    Socket client(server.port());
    ASSERT_TRUE(client.send("POST /busy HTTP/1.1\r\nHost: x\r\n" + framing + "\r\n\r\n"));
    const auto answer = receive_answer(client, 3s);
    EXPECT_EQ(status_of(answer), 429) << framing << ": " << answer;
    EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos) << answer;
    EXPECT_EQ(client.receive(3s), "") << framing;  // closed (after a linger), nothing more
  }
}

// What the check keeps for a request it lets through goes with the request to its handler, once,
// and is dropped after it; a request whose body never comes drops it without a handler. A request
// pipelined behind another is not asked, so it has none.
TEST(GuardedServer, ATicketTheCheckKeepsGoesToTheHandlerOrIsDroppedWithTheRequest) {
  auto issued = std::make_shared<std::atomic<int>>(0);
  auto dropped = std::make_shared<std::atomic<int>>(0);
  TestServer server(small_limits(), [issued, dropped](std::string_view, std::string_view path, auto) {
    GuardedServer::EarlyDecision decision;
    if (path == "/ticket") {
      ++*issued;
      decision.ticket = std::shared_ptr<int>(new int(0), [dropped](const int* held) {
        delete held;
        ++*dropped;
      });
    }
    return decision;
  });
  const auto wait_for_dropped = [&dropped](int n) {
    for (int i = 0; i < 300 && dropped->load() < n; ++i) std::this_thread::sleep_for(10ms);
    return dropped->load();
  };
  {
    Socket client(server.port());
    const std::string ticket = "POST /ticket HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok";
    ASSERT_TRUE(client.send(ticket));
    const auto answer = receive_answer(client, 3s);
    EXPECT_TRUE(answer.ends_with("\r\n\r\ntaken")) << answer;
    EXPECT_EQ(wait_for_dropped(1), 1);
    ASSERT_TRUE(client.send(ticket + ticket));  // the second arrives behind the first
    const auto answers = receive_answers(client, 2, 3s);
    ASSERT_EQ(answers.size(), 2U);
    EXPECT_TRUE(answers[0].ends_with("taken")) << answers[0];
    EXPECT_TRUE(answers[1].ends_with("none")) << answers[1];
    EXPECT_EQ(issued->load(), 2);
  }
  {
    Socket client(server.port());
    ASSERT_TRUE(client.send("POST /ticket HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"));
    for (int i = 0; i < 300 && issued->load() < 3; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(issued->load(), 3);
  }  // the client goes away before its body is in
  EXPECT_EQ(wait_for_dropped(3), 3);
}

// A client that was answered early and then sends not all of its body is cut at the request's
// deadline, without a second answer; the server goes on serving others.
TEST(GuardedServer, AnEarlyAnsweredBodyThatNeverComesIsCutAtTheDeadline) {
  BusyCheck busy;
  TestServer server(small_limits(), busy.check());  // the request's deadline: 1.5 s
  Socket client(server.port());
  ASSERT_TRUE(client.send("POST /busy HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"));
  EXPECT_EQ(status_of(receive_answer(client, 3s)), 429);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(client.receive(5s), "");  // closed without another word
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  Socket other(server.port());
  ASSERT_TRUE(other.send(get_hello()));
  EXPECT_EQ(status_of(receive_answer(other, 3s)), 200);
}

}  // namespace
}  // namespace gpucap::service
