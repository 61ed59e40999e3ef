// Scrapes /metrics and /healthz from a running node and controller and checks
// every metric name documented in docs/metrics.md, with values that follow
// what the test did.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <regex>
#include <thread>

#include "pikv/controller/controller_stats.h"
#include "pikv/node/node_server.h"
#include "pikv/node/node_stats.h"
#include "pikv/proto/permissions.h"
#include "pikv/rpc/node_client.h"
#include "test_support.h"

namespace pikv {
namespace {

using namespace std::chrono_literals;

std::string Get(const std::string& host_port, const std::string& path) {
  auto colon = host_port.rfind(':');
  httplib::Client c(host_port.substr(0, colon), std::stoi(host_port.substr(colon + 1)));
  c.set_read_timeout(5, 0);
  auto r = c.Get(path.c_str());
  return r && r->status == 200 ? r->body : std::string();
}

// Metric names in a docs/metrics.md table whose name starts with `prefix`.
std::vector<std::string> Documented(const std::string& prefix) {
  std::ifstream f(std::string(PIKV_SOURCE_DIR) + "/docs/metrics.md");
  std::vector<std::string> names;
  std::regex row("^\\| `(" + prefix + "[a-z0-9_]+)` \\|");
  for (std::string line; std::getline(f, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) names.push_back(m[1]);
  }
  return names;
}

double Value(const std::string& text, const std::string& series) {
  auto pos = text.find("\n" + series + " ");
  if (pos == std::string::npos) return -1;
  return std::stod(text.substr(pos + series.size() + 2));
}

TEST(MetricsTest, NodeAndControllerExposeEveryDocumentedMetric) {
  testing::TempDir dir;
  const int port = testing::FreePort();
  auto ctl = testing::StartController({"--endpoint", "tcp://127.0.0.1:" + std::to_string(port),
                                       "--http", "127.0.0.1:0", "--log-level", "error"});
  auto node =
      testing::StartNode({"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dir.str(), "--node-id",
                          "m1", "--http", "127.0.0.1:0", "--controller", ctl.endpoint,
                          "--heartbeat-interval", "200ms", "--log-level", "error"});
  ASSERT_FALSE(node.http.empty());
  rpc::NodeClient client(node.tcp, 5s);
  auto o = testing::MakeObject(1, 64 << 10);
  ASSERT_TRUE((*client.Put({&o.key, 1}, {&o.bytes, 1}))[0].ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*client.Get({&o.key, 1}))[0].ok());
  auto absent = testing::MakeObject(2, 1024);
  ASSERT_EQ((*client.Get({&absent.key, 1}))[0].code(), ErrorCode::kNotFound);

  const std::string metrics = Get(node.http, "/metrics");
  ASSERT_FALSE(metrics.empty());
  const auto node_names = Documented("pikv_node_");
  ASSERT_GE(node_names.size(), 20u);
  for (const auto& name : node_names)
    EXPECT_NE(metrics.find("# TYPE " + name + " "), std::string::npos) << name;
  EXPECT_EQ(Value(metrics, "pikv_node_requests_total{op=\"get\"}"), 4);
  EXPECT_EQ(Value(metrics, "pikv_node_requests_total{op=\"put\"}"), 1);
  EXPECT_EQ(Value(metrics, "pikv_node_tier_hits_total{tier=\"cpu\"}"), 3);
  EXPECT_EQ(Value(metrics, "pikv_node_tier_chunks{tier=\"cpu\"}"), 1);
  EXPECT_EQ(Value(metrics, "pikv_node_request_seconds_count{op=\"get\"}"), 4);
  EXPECT_EQ(Value(metrics, "pikv_node_request_seconds_count{op=\"put\"}"), 1);
  // Every request the node answers is counted by its row of the request
  // table, under its name (none served here reads 0).
  for (const Permission& row : Permissions()) {
    if (row.server != Server::kNode) continue;
    const std::string series =
        "pikv_node_requests_total{op=\"" + std::string(MsgTypeName(row.type)) + "\"}";
    EXPECT_GE(Value(metrics, series), 0) << series << " has no sample";
  }
  EXPECT_EQ(Value(metrics, "pikv_node_requests_total{op=\"pull\"}"), 0);
  EXPECT_NE(Get(node.http, "/healthz").find("\"node_id\":\"m1\""), std::string::npos);

  // The controller learns of the chunk, and says so.
  std::string ctl_metrics;
  for (int i = 0; i < 100; ++i) {
    ctl_metrics = Get(ctl.http, "/metrics");
    if (Value(ctl_metrics, "pikv_controller_registry_keys") == 1) break;
    std::this_thread::sleep_for(20ms);
  }
  const auto ctl_names = Documented("pikv_controller_");
  ASSERT_GE(ctl_names.size(), 12u);
  for (const auto& name : ctl_names)
    EXPECT_NE(ctl_metrics.find("# TYPE " + name + " "), std::string::npos) << name;
  for (const MetricFamily* family : controller::stats::kAll) {
    const std::string name(family->metric);
    EXPECT_NE(std::find(ctl_names.begin(), ctl_names.end(), name), ctl_names.end())
        << name << " is not in docs/metrics.md";
    EXPECT_NE(ctl_metrics.find("# TYPE " + name + " "), std::string::npos) << name;
  }
  EXPECT_EQ(Value(ctl_metrics, "pikv_controller_registry_keys"), 1);
  EXPECT_EQ(Value(ctl_metrics, "pikv_controller_nodes{state=\"alive\"}"), 1);
  EXPECT_NE(Get(ctl.http, "/healthz").find("\"status\":\"ok\""), std::string::npos);
  EXPECT_NE(Get(node.http, "/healthz").find("\"controller\":\"registered\""), std::string::npos);
}

// Whether `text` has a sample line of `metric` (labelled or not).
bool HasSample(const std::string& text, std::string_view metric) {
  for (const char* after : {"{", " "})
    if (text.find("\n" + std::string(metric) + after) != std::string::npos) return true;
  return false;
}

// Every counter the node declares (node_stats.h) reaches /metrics, the stats
// reply and docs/metrics.md, on a node with every part on: disk, zero-copy
// channel, reporter and puller. And /metrics shows nothing undeclared.
TEST(MetricsTest, EveryDeclaredNodeCounterReachesMetricsStatsAndTheDocs) {
  testing::TempDir dir;
  auto ctl = testing::StartController({"--endpoint",
                                       "tcp://127.0.0.1:" + std::to_string(testing::FreePort()),
                                       "--log-level", "error"});
  node::NodeOptions o;
  o.node_id = "all-parts";
  o.endpoints = {"tcp://127.0.0.1:*", "ipc://" + dir.str() + "/node.sock"};
  o.storage.cpu.capacity_bytes = 16 << 20;
  o.storage.disk = storage::DiskTierOptions{.path = dir.str() + "/disk"};
  o.http = "127.0.0.1:0";
  o.reporter = node::ReporterOptions{.controller = ctl.endpoint};
  auto server = node::NodeServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_FALSE((*server)->zero_copy_path().empty());

  const std::string metrics = Get((*server)->http_address(), "/metrics");
  auto fields = rpc::NodeClient((*server)->endpoints()[0], 5s).Stats();
  ASSERT_TRUE(fields.ok()) << fields.status().ToString();
  const auto documented = Documented("pikv_node_");
  for (const MetricFamily* family : node::stats::kAll) {
    const std::string metric(family->metric);
    EXPECT_TRUE(HasSample(metrics, metric)) << metric << " has no sample in /metrics";
    EXPECT_NE(std::find(documented.begin(), documented.end(), metric), documented.end())
        << metric << " is not in docs/metrics.md";
    // Its stats field: the pattern's text before and after the label's value.
    const std::string_view pattern = family->field;
    const size_t at = pattern.find("{}");
    const std::string head(pattern.substr(0, at));
    const std::string tail(at == std::string_view::npos ? "" : pattern.substr(at + 2));
    const bool in_stats = std::any_of(fields->begin(), fields->end(), [&](const auto& field) {
      const std::string& name = field.first;
      return at == std::string_view::npos ? name == head
                                          : name.size() > head.size() + tail.size() &&
                                                name.starts_with(head) && name.ends_with(tail);
    });
    EXPECT_TRUE(in_stats) << metric << ": no stats field " << pattern;
  }
  // Nothing else: every pikv_node_ family in /metrics is declared (or the
  // latency histogram).
  std::regex type("# TYPE (pikv_node_[a-z0-9_]+) ");
  for (std::sregex_iterator it(metrics.begin(), metrics.end(), type), end; it != end; ++it) {
    const std::string name = (*it)[1];
    const bool declared = name == "pikv_node_request_seconds" ||
                          std::any_of(std::begin(node::stats::kAll), std::end(node::stats::kAll),
                                      [&](const MetricFamily* f) { return f->metric == name; });
    EXPECT_TRUE(declared) << name;
  }
}

// The heartbeat's usage is read from the node's samples by family, and its
// field names are the node's own stats fields: a controller of either
// version reads the same numbers from it.
TEST(MetricsTest, TheHeartbeatCarriesTheNodesOwnStatsFields) {
  StatsRegistry registry(node::stats::kAll);
  registry.AddSource([](StatsSink& out) {
    uint64_t value = 1;  // each sample its own
    for (const MetricFamily* family : node::stats::kAll) {
      if (family->label.empty()) {
        out.Add(*family, value++);
      } else {
        for (const char* tier : {"cpu", "disk", "remote"}) out.Add(*family, tier, value++);
      }
    }
  });
  const NodeUsage usage = node::UsageOf(registry.Read());
  Header stats;
  for (auto& [name, value] : registry.FieldValues()) stats.fields[name] = int64_t(value);
  EXPECT_EQ(DecodeHeartbeat(stats), usage);
  const Header beat = EncodeHeartbeat(usage);
  EXPECT_EQ(beat.fields.size(), 6u + 4u * kNumTiers);
  for (const auto& [name, value] : beat.fields) {
    ASSERT_EQ(stats.fields.count(name), 1u) << name << " is not a stats field of the node";
    EXPECT_EQ(FieldInt(stats.fields, name), std::get<int64_t>(value)) << name;
    EXPECT_GT(std::get<int64_t>(value), 0) << name << " was not read from its family";
  }
}

// By default the node faults its CPU arena in on a thread: it answers at
// once, and /healthz and /metrics follow the faulting to the arena's size.
// With prefault off the gauge stays 0.
TEST(MetricsTest, TheArenaIsFaultedInBehindAReadyNode) {
  for (bool prefault : {true, false}) {
    testing::TempDir dir;
    auto node = testing::StartNode({"--endpoint", "tcp://127.0.0.1:*", "--data-dir", dir.str(),
                                    "--http", "127.0.0.1:0", "--controller", "", "--disk", "false",
                                    "--cpu-capacity", "256MiB", "--prefault",
                                    prefault ? "true" : "false", "--log-level", "error"});
    rpc::NodeClient client(node.tcp, 5s);
    auto o = testing::MakeObject(1, 64 << 10);
    ASSERT_TRUE((*client.Put({&o.key, 1}, {&o.bytes, 1}))[0].ok());
    const std::string faulted = prefault ? "268435456" : "0";
    std::string health;
    for (int i = 0; i < 500; ++i) {
      health = Get(node.http, "/healthz");
      if (health.find("\"arena_faulted_bytes\":" + faulted) != std::string::npos) break;
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_NE(health.find("\"arena_bytes\":268435456"), std::string::npos) << health;
    EXPECT_NE(health.find("\"arena_faulted_bytes\":" + faulted), std::string::npos) << health;
    EXPECT_EQ(Value(Get(node.http, "/metrics"), "pikv_node_arena_faulted_bytes"),
              prefault ? 268435456.0 : 0.0);
    ASSERT_TRUE((*client.Get({&o.key, 1}))[0].ok()) << "the object survived the faulting";
  }
}

}  // namespace
}  // namespace pikv
