// CurveZMQ keys, the allow-list, and the ZAP handler on real ZeroMQ sockets:
// a CURVE server admits exactly the listed keys and tells each message's
// role; unknown keys and unencrypted peers never get a message through.
#include "pikv/transport/curve.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "test_support.h"

namespace pikv {
namespace {

TEST(CurveTest, AKeyPairIsWrittenOnceReadBackAndItsSecretIsPrivate) {
  testing::TempDir dir;
  auto keys = NewCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  const std::string prefix = dir.str() + "/node-a";
  ASSERT_TRUE(WriteCurveKeyPair(*keys, prefix).ok());
  EXPECT_FALSE(WriteCurveKeyPair(*keys, prefix).ok());  // never overwritten
  struct stat st {};
  ASSERT_EQ(stat((prefix + ".key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto read = ReadCurveKeyPair(prefix);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->public_key, keys->public_key);
  EXPECT_EQ(read->secret_key, keys->secret_key);
  // Another pair's public half is not this secret's.
  auto other = NewCurveKeyPair();
  ASSERT_TRUE(other.ok() && WriteCurveKeyPair(*other, dir.str() + "/b").ok());
  ASSERT_EQ(rename((dir.str() + "/b.pub").c_str(), (prefix + ".pub").c_str()), 0);
  EXPECT_EQ(ReadCurveKeyPair(prefix).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(ReadCurveKeyPair(dir.str() + "/missing").ok());
}

TEST(CurveTest, TheAllowListNamesARoleForEachKeyAndANodeIdForNodes) {
  auto a = *NewCurveKeyPair(), e = *NewCurveKeyPair(), n = *NewCurveKeyPair();
  auto list = CurveKeyring::Parse("# the cluster\nadmin " + a.public_key + "\n\nengine " +
                                  e.public_key + "  # vllm-1\nnode " + n.public_key + " node-a\n");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(list->Find(a.public_key)->UserId(), "admin");
  EXPECT_EQ(list->Find(e.public_key)->UserId(),
            "engine:engine@");  // unnamed: "engine", default tenant
  EXPECT_EQ(list->Find(n.public_key)->UserId(), "node:node-a");
  EXPECT_EQ(list->Find(a.secret_key), nullptr);
  EXPECT_EQ(*list->NodeKey("node-a"), n.public_key);
  EXPECT_EQ(list->NodeKey("node-b"), nullptr);
  EXPECT_EQ(list->ControllerKey(), nullptr);
  auto with_controller = CurveKeyring::Parse("controller " + a.public_key + "\n");
  ASSERT_TRUE(with_controller.ok());
  EXPECT_EQ(*with_controller->ControllerKey(), a.public_key);
  // A key holding '#' is not cut short as a comment.
  // A key holding '#' is not cut short as a comment; a word after the key
  // that starts with '#' begins one, as does a line's first.
  std::string hashed;
  while (hashed.find('#') == std::string::npos) hashed = NewCurveKeyPair()->public_key;
  auto with_hash = CurveKeyring::Parse("engine " + hashed + " # commented\nnode " + n.public_key +
                                       " n1 #comment\n  # a comment line\n");
  ASSERT_TRUE(with_hash.ok()) << with_hash.status().ToString();
  EXPECT_NE(with_hash->Find(hashed), nullptr);
  EXPECT_EQ(*with_hash->NodeKey("n1"), n.public_key);
  for (const std::string& bad : std::vector<std::string>{
           "root " + a.public_key, "node " + a.public_key, "engine " + a.public_key + " x t extra",
           "engine " + a.public_key + " bad/name", "engine " + a.public_key + " x bad:tenant",
           "engine " + a.public_key + " x t1\nengine " + e.public_key + " x t2", "revoked",
           "revoked a b", std::string("admin tooshort"), "node " + n.public_key + " a b",
           "admin " + a.public_key + "\nengine " + a.public_key,
           "node " + a.public_key + " x\nnode " + e.public_key + " x",
           "controller " + a.public_key + "\ncontroller " + e.public_key,
           "controller " + a.public_key + " x",
           // Reserved: an engine named "unknown" would own every unstamped
           // object; tenant "default" would read as the default tenant.
           "engine " + a.public_key + " unknown t", "engine " + a.public_key + " x default",
           "engine " + a.public_key + " default", "engine " + a.public_key + " x unknown"}) {
    EXPECT_EQ(CurveKeyring::Parse(bad).code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ParseUserId("node:node-a"), (CurvePeer{Role::kNode, "node-a"}));
  EXPECT_EQ(ParseUserId("engine"), (CurvePeer{Role::kEngine, ""}));  // from before names
  EXPECT_EQ(ParseUserId("engine:e1@acme"), (CurvePeer{Role::kEngine, "", "e1", "acme"}));
  EXPECT_EQ(ParseUserId("engine:e1@"), (CurvePeer{Role::kEngine, "", "e1", ""}));
  EXPECT_FALSE(ParseUserId("engine:e1").has_value());
  EXPECT_FALSE(ParseUserId("engine:@acme").has_value());
  EXPECT_FALSE(ParseUserId("engine:a b@c").has_value());
  EXPECT_EQ(ParseUserId("admin"), (CurvePeer{Role::kAdmin, ""}));
  EXPECT_FALSE(ParseUserId("node:").has_value());
  EXPECT_FALSE(ParseUserId("").has_value());
}

TEST(CurveKeyringTest, EnginesHaveNamesTenantsAndRevocations) {
  const CurveKeyPair a = *NewCurveKeyPair(), b = *NewCurveKeyPair(), c = *NewCurveKeyPair();
  auto list = CurveKeyring::Parse("engine " + a.public_key + " vllm-a acme\nengine " +
                                  b.public_key + " vllm-a acme  # a rotated key\nengine " +
                                  c.public_key + " batch\nrevoked old-engine\n");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->Find(a.public_key)->UserId(), "engine:vllm-a@acme");
  EXPECT_EQ(list->Find(b.public_key)->UserId(), "engine:vllm-a@acme");
  EXPECT_EQ(list->Find(c.public_key)->UserId(), "engine:batch@");
  EXPECT_EQ(list->EngineNames(), (std::set<std::string>{"vllm-a", "batch"}));
  EXPECT_EQ(list->revoked(), (std::set<std::string>{"old-engine"}));
  Revocations revoked;
  EXPECT_FALSE(revoked.Contains("batch"));
  EXPECT_TRUE(revoked.Add("batch"));
  EXPECT_FALSE(revoked.Add("batch"));
  const CurvePeer batch = *list->Find(c.public_key), other = *list->Find(a.public_key);
  EXPECT_TRUE(IsRevoked(&batch, &revoked));
  EXPECT_FALSE(IsRevoked(&other, &revoked));
  EXPECT_FALSE(IsRevoked(nullptr, &revoked));  // ipc: the node's own user
}

class CurveServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_keys_ = *NewCurveKeyPair();
    engine_ = *NewCurveKeyPair();
    node_ = *NewCurveKeyPair();
    auto list = CurveKeyring::Parse("engine " + engine_.public_key + "\nnode " + node_.public_key +
                                    " node-a\n");
    ASSERT_TRUE(list.ok());
    auto zap = ZapHandler::Start(context_.handle(), std::move(*list));
    ASSERT_TRUE(zap.ok()) << zap.status().ToString();
    zap_ = std::move(*zap);
    server_.set(zmq::sockopt::curve_server, 1);
    server_.set(zmq::sockopt::curve_secretkey, server_keys_.secret_key);
    server_.bind("tcp://127.0.0.1:*");
    endpoint_ = server_.get(zmq::sockopt::last_endpoint);
  }
  // Sends "hello" from a client with `keys` (none: no encryption); returns
  // the user id the server saw, or nullopt when nothing arrived (waiting
  // long when it should arrive, briefly when it should not).
  std::optional<std::string> Deliver(const CurveKeyPair* keys, bool expected = true) {
    server_.set(zmq::sockopt::rcvtimeo, expected ? 10000 : 500);
    zmq::socket_t client(context_, zmq::socket_type::dealer);
    client.set(zmq::sockopt::linger, 0);
    if (keys) {
      client.set(zmq::sockopt::curve_serverkey, server_keys_.public_key);
      client.set(zmq::sockopt::curve_publickey, keys->public_key);
      client.set(zmq::sockopt::curve_secretkey, keys->secret_key);
    }
    client.connect(endpoint_);
    client.send(zmq::str_buffer("hello"), zmq::send_flags::dontwait);
    zmq::message_t routing, body;
    if (!server_.recv(routing) || !routing.more() || !server_.recv(body)) return std::nullopt;
    EXPECT_EQ(body.to_string(), "hello");
    const char* user = body.gets("User-Id");
    return user ? std::string(user) : std::string();
  }

  zmq::context_t context_;
  std::unique_ptr<ZapHandler> zap_;
  zmq::socket_t server_{context_, zmq::socket_type::router};
  CurveKeyPair server_keys_, engine_, node_;
  std::string endpoint_;
};

TEST_F(CurveServerTest, ListedKeysGetThroughWithTheirRoles) {
  EXPECT_EQ(Deliver(&engine_), "engine:engine@");
  EXPECT_EQ(Deliver(&node_), "node:node-a");
  EXPECT_EQ(zap_->counters().admitted, 2u);
}

TEST_F(CurveServerTest, UnknownKeysAndUnencryptedPeersGetNothingThrough) {
  const CurveKeyPair stranger = *NewCurveKeyPair();
  EXPECT_EQ(Deliver(&stranger, false), std::nullopt);
  EXPECT_EQ(zap_->counters().refused, 1u);
  EXPECT_EQ(Deliver(nullptr, false), std::nullopt);  // the NULL mechanism is not CURVE
  EXPECT_EQ(Deliver(&engine_), "engine:engine@");    // and the server is unharmed
}

// A CURVE server ROUTER on loopback: whether a client with `keys` gets a
// message through (the ZAP handler on `context` decides).
class CurveRouter {
 public:
  CurveRouter(zmq::context_t& context, const CurveKeyPair& server)
      : context_(context), server_(server), router_(context, zmq::socket_type::router) {
    router_.set(zmq::sockopt::curve_server, 1);
    router_.set(zmq::sockopt::curve_secretkey, server.secret_key);
    router_.set(zmq::sockopt::rcvtimeo, 1500);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  }
  bool GetsIn(const CurveKeyPair& keys) {
    zmq::socket_t client(context_, zmq::socket_type::dealer);
    client.set(zmq::sockopt::linger, 0);
    client.set(zmq::sockopt::curve_serverkey, server_.public_key);
    client.set(zmq::sockopt::curve_publickey, keys.public_key);
    client.set(zmq::sockopt::curve_secretkey, keys.secret_key);
    client.connect(endpoint_);
    client.send(zmq::str_buffer("hi"), zmq::send_flags::dontwait);
    zmq::message_t routing, body;
    return router_.recv(routing).has_value() && router_.recv(body).has_value();
  }

 private:
  zmq::context_t& context_;
  CurveKeyPair server_;
  zmq::socket_t router_;
  std::string endpoint_;
};

// A revoked engine's key is refused at the handshake: by a `revoked` line
// the handler reads when the keyring file changes (no restart), by the
// engine's lines being removed, and by a revocation the server records.
TEST(CurveReloadTest, TheKeyringIsReadAgainWhenItChanges) {
  const CurveKeyPair server = *NewCurveKeyPair(), a = *NewCurveKeyPair(), b = *NewCurveKeyPair(),
                     c = *NewCurveKeyPair();
  const std::string path = ::testing::TempDir() + "/reload-keyring-" + std::to_string(getpid());
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  const std::string all = "engine " + a.public_key + " a\nengine " + b.public_key + " b\nengine " +
                          c.public_key + " c\n";
  write(all);
  zmq::context_t context;
  auto revoked = std::make_shared<Revocations>();
  auto zap = ZapHandler::Start(context.handle(), *CurveKeyring::Load(path), revoked, path);
  ASSERT_TRUE(zap.ok());
  CurveRouter router(context, server);
  auto gets_in = [&](const CurveKeyPair& keys) { return router.GetsIn(keys); };
  EXPECT_TRUE(gets_in(a));
  EXPECT_TRUE(gets_in(b));
  EXPECT_TRUE(gets_in(c));
  // Revoke a by a line, and b by removing its line; c by the server.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a new mtime
  write("engine " + a.public_key + " a\nengine " + c.public_key + " c\nrevoked a\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * ZapHandler::kReloadCheckMs));
  revoked->Add("c");
  EXPECT_FALSE(gets_in(a));
  EXPECT_FALSE(gets_in(b));
  EXPECT_FALSE(gets_in(c));
  EXPECT_TRUE(revoked->Contains("a"));
  EXPECT_TRUE(revoked->Contains("b"));
  // A keyring that does not parse is not taken: the old one stays.
  write("engine nonsense\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * ZapHandler::kReloadCheckMs));
  EXPECT_EQ((*zap)->counters().refused, 3u);
  std::remove(path.c_str());
}

// `revoked engine` refuses the unnamed engines only: admins and nodes, whose
// peers carry CurvePeer's default name, still get in.
TEST(CurveRevokedTest, RevokingTheUnnamedEngineLeavesOtherRolesIn) {
  const CurveKeyPair server = *NewCurveKeyPair(), admin = *NewCurveKeyPair(),
                     engine = *NewCurveKeyPair();
  zmq::context_t context;
  auto zap = ZapHandler::Start(context.handle(),
                               *CurveKeyring::Parse("admin " + admin.public_key + "\nengine " +
                                                    engine.public_key + "\nrevoked engine\n"));
  ASSERT_TRUE(zap.ok());
  CurveRouter router(context, server);
  auto gets_in = [&](const CurveKeyPair& keys) { return router.GetsIn(keys); };
  EXPECT_TRUE(gets_in(admin));
  EXPECT_FALSE(gets_in(engine));
}

// One ROUTER: ipc bound first without CURVE (only the server's user can open
// it), then tcp with it. An ipc peer needs no key and is the trusted sender;
// over tcp only listed keys get in, each with its role.
TEST(CurveSocketTest, IpcIsTheTrustedSenderAndTcpNeedsAListedKey) {
  testing::TempDir dir;
  zmq::context_t context;
  const CurveKeyPair server = *NewCurveKeyPair(), engine = *NewCurveKeyPair();
  auto keyring = CurveKeyring::Parse("controller " + server.public_key + "\nengine " +
                                     engine.public_key + "\n");
  ASSERT_TRUE(keyring.ok()) << keyring.status().ToString();
  const CurveSecurity security{server, *keyring};
  auto zap = ZapHandler::Start(context.handle(), *keyring);
  ASSERT_TRUE(zap.ok());
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  const std::string ipc = "ipc://" + dir.str() + "/s.sock";
  ServeCurve(router.handle(), nullptr);
  router.bind(ipc);
  ServeCurve(router.handle(), &security);
  router.bind("tcp://127.0.0.1:*");
  const std::string tcp = router.get(zmq::sockopt::last_endpoint);
  EXPECT_TRUE(UsesCurve(tcp));
  EXPECT_FALSE(UsesCurve(ipc));

  // The role of the next message's sender ("" for the trusted one), or
  // nullopt when nothing arrives.
  auto deliver = [&](const std::string& endpoint, const CurveKeyPair* keys,
                     bool expected = true) -> std::optional<std::string> {
    zmq::socket_t client(context, zmq::socket_type::dealer);
    client.set(zmq::sockopt::linger, 0);
    if (keys) DialCurve(client.handle(), {keys->public_key, keys->secret_key, server.public_key});
    client.connect(endpoint);
    client.send(zmq::str_buffer("hi"), zmq::send_flags::dontwait);
    router.set(zmq::sockopt::rcvtimeo, expected ? 10000 : 500);
    zmq::message_t routing, body;
    if (!router.recv(routing) || !router.recv(body)) return std::nullopt;
    std::optional<CurvePeer> storage;
    const CurvePeer* sender = SenderOf(body.handle(), storage);
    return sender ? sender->UserId() : "";
  };
  EXPECT_EQ(deliver(ipc, nullptr), "");
  EXPECT_EQ(deliver(tcp, &engine), "engine:engine@");
  EXPECT_EQ(deliver(tcp, nullptr, false), std::nullopt);
  EXPECT_EQ(deliver(tcp, &server, false), std::nullopt);  // a server's key is not a client's
  EXPECT_EQ((*zap)->counters().admitted, 1u);
}

}  // namespace
}  // namespace pikv
