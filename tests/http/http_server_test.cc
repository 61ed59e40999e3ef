#include "pikv/http/http_server.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "test_support.h"

namespace pikv::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(HttpParseTest, RequestLinesAndQueries) {
  auto r = ParseRequestHead("GET /locate?key=ab%2Ccd&host=h+1&flag HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->path, "/locate");
  EXPECT_EQ(r->Param("key"), "ab,cd");
  EXPECT_EQ(r->Param("host"), "h 1");
  EXPECT_EQ(r->query.count("flag"), 1u);
  EXPECT_EQ(r->Param("absent"), "");
  EXPECT_EQ(ParseRequestHead("GET /x?a=%zz&b=%4 HTTP/1.0\r\n\r\n")->Param("a"), "%zz");
  for (const char* bad : {"", "GET\r\n\r\n", "GET / HTTP/2\r\n\r\n", "GET x HTTP/1.1\r\n\r\n",
                          "GET  HTTP/1.1\r\n\r\n", "GET /a\x01 HTTP/1.1\r\n\r\n", "no line end"}) {
    EXPECT_FALSE(ParseRequestHead(bad).ok()) << bad;
  }
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::map<std::string, Handler> routes;
    routes["/healthz"] = [](const Request&) { return Response{200, "application/json", "{}"}; };
    routes["/throws"] = [](const Request&) -> Response { throw std::runtime_error("bug"); };
    Options o{"127.0.0.1:0", 1000ms, 16};
    auto s = Server::Start(o, std::move(routes));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    port_ = std::stoi(server_->address().substr(server_->address().rfind(':') + 1));
  }
  int Connect() {
    const int fd = testing::ConnectLoopback(port_);
    EXPECT_GE(fd, 0);
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }
  std::string Exchange(const std::string& request) {
    int fd = Connect();
    send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, n);
    close(fd);
    return out;
  }
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

TEST_F(HttpServerTest, AnswersRoutesAndRefusesTheRest) {
  EXPECT_EQ(Exchange("GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  std::string head = Exchange("HEAD /healthz HTTP/1.1\r\n\r\n");
  EXPECT_NE(head.find("Content-Length: 2"), std::string::npos);
  EXPECT_EQ(head.find("{}"), std::string::npos) << "HEAD has no body";
  EXPECT_EQ(Exchange("GET /nope HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Exchange("POST /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(Exchange("GET /throws HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 500", 0), 0u);
  EXPECT_EQ(Exchange("garbage\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(Exchange("GET /" + std::string(9000, 'a')).rfind("HTTP/1.1 431", 0), 0u);
}

// Stalled clients, many more than the connection limit, never delay a
// health check, and each is dropped at its deadline.
TEST_F(HttpServerTest, StalledClientsDoNotDelayOthers) {
  std::vector<int> stalled;
  for (int i = 0; i < 100; ++i) {
    stalled.push_back(Connect());
    send(stalled.back(), "GET /heal", 9, MSG_NOSIGNAL);
  }
  std::this_thread::sleep_for(50ms);
  const auto t0 = Clock::now();
  EXPECT_EQ(Exchange("GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_LT(Clock::now() - t0, 500ms);
  // The survivors among the stalled are closed at their deadline (1 s).
  char c;
  const auto t1 = Clock::now();
  EXPECT_EQ(recv(stalled.back(), &c, 1, 0), 0) << "closed, not answered";
  EXPECT_LT(Clock::now() - t1, 2s);
  for (int fd : stalled) close(fd);
}

TEST_F(HttpServerTest, StopsPromptlyWithClientsConnected) {
  int fd = Connect();
  send(fd, "GET", 3, MSG_NOSIGNAL);
  const auto t0 = Clock::now();
  server_->Stop();
  EXPECT_LT(Clock::now() - t0, 1s);
  close(fd);
}

}  // namespace
}  // namespace pikv::http
