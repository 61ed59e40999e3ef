// coord: the HTTP client and etcd calls against a real etcd and against a
// hostile HTTP server (answers that are not etcd's must be errors, never
// throws or hangs), and the controller finder's moves.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "pikv/coord/etcd_client.h"
#include "pikv/coord/find_controllers.h"
#include "pikv/coord/http_post.h"
#include "pikv/coord/leader_key.h"
#include "pikv/launch/etcd.h"
#include "pikv/launch/etcd_certs.h"

namespace pikv::coord {
namespace {

using namespace std::chrono_literals;

// An HTTP server on loopback (IPv4, or IPv6's ::1) that reads one request
// per connection and writes `answer` (then closes; or stays silent when
// answer is empty).
class CannedServer {
 public:
  explicit CannedServer(std::string answer, bool ipv6 = false)
      : answer_(std::move(answer)), ipv6_(ipv6) {
    fd_ = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    if (ipv6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_loopback;
      ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
      socklen_t len = sizeof a;
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin6_port);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
      socklen_t len = sizeof a;
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin_port);
    }
    ::listen(fd_, 8);
    thread_ = std::thread([this] {
      while (!stop_) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[4096];
        (void)::recv(c, buf, sizeof buf, 0);
        if (answer_.empty()) {
          std::this_thread::sleep_for(1500ms);  // silent past the client's deadline
        } else {
          (void)::send(c, answer_.data(), answer_.size(), MSG_NOSIGNAL);
        }
        ::close(c);
      }
    });
  }
  ~CannedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string address() const { return (ipv6_ ? "[::1]:" : "127.0.0.1:") + std::to_string(port_); }
  std::string url() const { return "http://" + address() + "/"; }

 private:
  std::string answer_;
  bool ipv6_ = false;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string Http(const std::string& body, const std::string& status = "200 OK") {
  return "HTTP/1.1 " + status +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

TEST(HttpClient, ReadsAnswersOverIpv4AndIpv6AndKeepsOneDeadline) {
  HttpClient http;
  CannedServer chunked(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n");
  auto r = http.Post(chunked.url(), "{}", 1s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{\"a\":1}");
  CannedServer v6(Http("{}"), /*ipv6=*/true);
  auto r6 = http.Post(v6.url(), "{}", 1s);
  ASSERT_TRUE(r6.ok()) << r6.status().ToString();
  EXPECT_EQ(r6->body, "{}");
  CannedServer silent("");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(http.Post(silent.url(), "{}", 300ms).code(), ErrorCode::kTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  CannedServer garbage("SSH-2.0-OpenSSH\r\n\r\n");
  EXPECT_FALSE(http.Post(garbage.url(), "{}", 1s).ok());
  EXPECT_FALSE(http.Post("http://127.0.0.1:1/", "{}", 300ms).ok());  // nobody listening
  EXPECT_FALSE(http.Post("file:///etc/passwd", "{}", 300ms).ok());   // http(s) only
  CannedServer huge(Http(std::string(kMaxResponseBytes + 1, 'x')));
  EXPECT_EQ(http.Post(huge.url(), "{}", 2s).code(), ErrorCode::kTooLarge);
}

TEST(HttpClient, RefusesAnHttpsServerItCannotVerify) {
  // A plaintext server named by https: the TLS handshake fails, in time.
  CannedServer plain(Http("{}"));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(HttpClient().Post("https://" + plain.address() + "/", "{}", 500ms).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
}

TEST(EtcdClient, HostileAnswersAreErrorsNotThrows) {
  const std::vector<std::string> bodies = {"not json",
                                           "[1,2]",
                                           R"({"succeeded":"yes","header":{"revision":"x"}})",
                                           R"({"ID":{"x":1}})",
                                           R"({"result":7})",
                                           R"({"kvs":[{"key":"!!!","create_revision":"1"}]})",
                                           R"({"kvs":[{"key":"YQ==","create_revision":[1]}]})",
                                           R"({"kvs":"many"})"};
  for (const auto& body : bodies) {
    CannedServer server(Http(body));
    EtcdClient etcd({server.address()}, 500ms);
    EXPECT_FALSE(etcd.GrantLease(3).ok()) << body;
    EXPECT_FALSE(etcd.KeepAlive(1).ok()) << body;
    auto created = etcd.CreateIfAbsent("k", "v", 1);
    EXPECT_TRUE(!created.ok() || !created->has_value()) << body;  // never a win
    auto got = etcd.Get("k");
    EXPECT_TRUE(!got.ok() || !got->has_value()) << body;
    EXPECT_FALSE(etcd.List("p").ok() && body.find("kvs") != std::string::npos) << body;
  }
  CannedServer refused(Http("{}", "500 Internal Server Error"));
  EXPECT_EQ(EtcdClient({refused.address()}, 500ms).GrantLease(3).code(), ErrorCode::kUnavailable);
}

TEST(EtcdClient, ParsesEndpoints) {
  EXPECT_EQ(*EtcdClient::ParseEndpoints("a:2379,http://b:2380/,[::1]:2379"),
            (std::vector<std::string>{"a:2379", "b:2380", "[::1]:2379"}));
  for (const char* bad : {"", "a", "a:0", "a:99999", ":2379", "a:2379,", "u@a:1", "a:1/x",
                          "::1:2379", "[::1]", "a:+1", "a:1?x", "http://a:1,https://b:1"})
    EXPECT_FALSE(EtcdClient::ParseEndpoints(bad).ok()) << bad;
  // https needs TLS files; TLS files need https (or no scheme), and must be readable.
  EXPECT_FALSE(EtcdAccess::Parse("https://a:1").ok());
  EXPECT_FALSE(EtcdAccess::Parse("http://a:1", "/nonexistent").ok());
  EXPECT_FALSE(EtcdAccess::Parse("a:1", "/nonexistent").ok());
}

TEST(EtcdClient, AgainstARealEtcd) {
  if (!launch::EtcdCluster::Available()) GTEST_SKIP() << "etcd is not installed";
  launch::EtcdCluster cluster(1);
  ASSERT_TRUE(cluster.Start().ok());
  EtcdClient etcd(cluster.access(), 1s);
  auto lease = etcd.GrantLease(5);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  auto won = etcd.CreateIfAbsent("pikv/t/leader", "v1", *lease);
  ASSERT_TRUE(won.ok() && won->has_value());
  auto again = etcd.CreateIfAbsent("pikv/t/leader", "v2", *lease);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());  // the key exists: no second winner
  EXPECT_TRUE(*etcd.PutIfCreated("pikv/t/leader", "v3", *lease, **won));
  EXPECT_FALSE(*etcd.PutIfCreated("pikv/t/leader", "v4", *lease, **won + 100));
  auto got = etcd.Get("pikv/t/leader");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->value, "v3");
  EXPECT_EQ((*got)->create_revision, **won);
  EXPECT_EQ((*got)->lease, *lease);
  ASSERT_TRUE(etcd.Put("pikv/t/controllers/a", "x", *lease).ok());
  EXPECT_EQ(etcd.List("pikv/t/controllers/")->size(), 1u);
  EXPECT_GT(*etcd.KeepAlive(*lease), 0);
  ASSERT_TRUE(etcd.Revoke(*lease).ok());  // takes its keys with it
  EXPECT_FALSE(etcd.Get("pikv/t/leader")->has_value());
  EXPECT_EQ(*etcd.KeepAlive(*lease), 0);  // unknown: expired
  // A dead member first in the list: the next one answers.
  auto two = cluster.access();
  two.endpoints.insert(two.endpoints.begin(), "127.0.0.1:1");
  EXPECT_TRUE(EtcdClient(two, 500ms).Get("x").ok());
  // Over TLS, etcd refuses a client without a certificate, or one another CA signed.
  auto anonymous = cluster.access();
  anonymous.tls.cert = anonymous.tls.key = "";
  EXPECT_FALSE(EtcdClient(anonymous, 500ms).Get("x").ok());
  launch::TempDir other;
  ASSERT_TRUE(launch::WriteEtcdCerts(other.str(), {"localhost"}).ok());
  auto stranger = cluster.access();
  stranger.tls = TlsFiles::InDir(other.str());
  EXPECT_FALSE(EtcdClient(stranger, 500ms).Get("x").ok());
  // A client etcd would accept, trusting another CA: etcd's certificate is
  // not one it knows, so it does not talk.
  auto wary = cluster.access();
  wary.tls.ca = other.str() + "/ca.crt";
  const auto refused = EtcdClient(wary, 500ms).Get("x");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("SSL"), std::string::npos)
      << refused.status().ToString();
  auto plaintext = cluster.access();
  plaintext.tls = {};
  EXPECT_FALSE(EtcdClient(plaintext, 500ms).Get("x").ok());
}

TEST(ControllerFinder, MovesAlongAListAndFollowsRedirects) {
  auto f = *ControllerFinder::Parse("tcp://a:1,tcp://b:1,tcp://c:1");
  EXPECT_TRUE(f->follows());
  EXPECT_EQ(f->Current(), "tcp://a:1");
  f->Failed("tcp://a:1");
  EXPECT_EQ(f->Current(), "tcp://b:1");
  f->Failed("tcp://a:1");  // stale news: already moved on
  EXPECT_EQ(f->Current(), "tcp://b:1");
  f->Redirect("tcp://c:1");
  EXPECT_EQ(f->Current(), "tcp://c:1");
  f->Redirect("not an endpoint");  // treated as no answer
  EXPECT_NE(f->Current(), "not an endpoint");
  f->Redirect(std::string(600, 'x'));
  EXPECT_NE(f->Current().size(), 600u);
  auto one = *ControllerFinder::Parse("tcp://a:1");
  EXPECT_FALSE(one->follows());
  one->Failed("tcp://a:1");
  EXPECT_EQ(one->Current(), "tcp://a:1");
  // Redirected away from its one endpoint, it follows, and goes back to
  // that endpoint when the leader it was sent to stops answering.
  one->Redirect("tcp://leader:1", 7);
  EXPECT_TRUE(one->follows());
  EXPECT_EQ(one->Current(), "tcp://leader:1");
  one->Failed("tcp://leader:1");
  EXPECT_EQ(one->Current(), "tcp://a:1");
  // A redirect to a leadership older than one seen is no answer.
  one->Redirect("tcp://deposed:1", 5);
  EXPECT_EQ(one->Current(), "tcp://a:1");
  one->Redirect("tcp://newer:1", 9);
  EXPECT_EQ(one->Current(), "tcp://newer:1");
  EXPECT_FALSE(ControllerFinder::Parse("").ok());
  EXPECT_FALSE(ControllerFinder::Parse("tcp://a:1,,tcp://b:1").ok());
  EXPECT_FALSE(FindControllers("etcd://h:2379/bad name").ok());
  EXPECT_FALSE(FindControllers("etcd://nope").ok());
  // The engine's client library parses listed specs only; etcd is coord's.
  auto etcd_in_transport = ControllerFinder::Parse("etcd://h:2379");
  ASSERT_FALSE(etcd_in_transport.ok());
  EXPECT_NE(etcd_in_transport.status().message().find("etcd"), std::string::npos);
  EXPECT_EQ((*FindControllers("tcp://a:1,tcp://b:1"))->listed().size(), 2u);
  EXPECT_TRUE(DialsTcp("etcd://h:1") && DialsTcp("tcp://a:1") && !DialsTcp("ipc:///x"));
}

TEST(ControllerFinder, AnEtcdSpecWithNoLeaderNamesNone) {
  CannedServer empty(Http(R"({"header":{"revision":"3"}})"));
  auto f = *FindControllers("etcd://" + empty.address() + "/c1");
  EXPECT_EQ(f->Await(std::chrono::steady_clock::now() + 300ms), "");  // read, and no leader
  CannedServer named(Http(R"({"kvs":[{"key":"eA==","create_revision":"9","value":")" +
                          std::string("eyJlbmRwb2ludCI6InRjcDovL2w6MSJ9") + R"("}]})"));
  auto g = *FindControllers("etcd://" + named.address());
  const auto soon = std::chrono::steady_clock::now() + 2s;
  EXPECT_EQ(g->Await(soon), "tcp://l:1");  // {"endpoint":"tcp://l:1"}
  g->Failed("tcp://l:1");
  EXPECT_EQ(g->Await(soon), "tcp://l:1");  // read again at once
}

TEST(ControllerFinder, NeverWaitsOnEtcdInCurrent) {
  // etcd that never answers: the finder's own thread waits, callers do not.
  CannedServer silent("");
  auto f = *FindControllers("etcd://" + silent.address());
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(f->Current(), "");
    f->Failed("");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 50ms);
    std::this_thread::sleep_for(10ms);
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(f->Await(t0 + 200ms), "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 400ms);
}

TEST(ControllerFinder, ParsesTlsOptions) {
  EXPECT_FALSE(FindControllers("etcd://h:2379?tls=/nonexistent").ok());  // unreadable
  EXPECT_FALSE(FindControllers("etcd://h:2379?tls=").ok());
  EXPECT_FALSE(FindControllers("etcd://h:2379?insecure=1").ok());
  EXPECT_FALSE(FindControllers("etcd://https://h:2379").ok());  // https needs tls=
  launch::TempDir certs;
  ASSERT_TRUE(launch::WriteEtcdCerts(certs.str(), {"localhost"}).ok());
  EXPECT_TRUE(FindControllers("etcd://h:2379,[::1]:2379/c1?tls=" + certs.str()).ok());
}

}  // namespace
}  // namespace pikv::coord
