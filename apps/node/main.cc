// pikv-node: the per-host agent. Settings come from flags, PIKV_* variables
// and a YAML file (common/config.h). Prints "endpoint <url>" per bound endpoint, then
// "pikv-node <id> ready", then serves until SIGTERM or SIGINT, and exits 0 after a clean shutdown.
#include <malloc.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "pikv/common/config_cli.h"
#include "pikv/common/stop_signal.h"
#include "pikv/common/units.h"
#include "pikv/common/version.h"
#include "pikv/node/node_server.h"

namespace {

// Each setting's default is the options struct's own (written there once).
pikv::Config NodeConfig() {
  using K = pikv::Config::Kind;
  const pikv::node::NodeOptions d;
  const pikv::storage::DiskTierOptions disk;
  const pikv::storage::RemoteTierOptions remote;
  const pikv::node::ReporterOptions reporter;
  constexpr int64_t kMiB = 1 << 20;
  pikv::Config c;
  c.Declare("endpoint", K::kList, "",
            "Endpoints to serve; default tcp://127.0.0.1:7400 and ipc://<data-dir>/node.sock");
  c.Declare("node-id", K::kString, "", "Node id (default: host name)");
  c.Declare("data-dir", K::kString, "./data", "Directory for the disk tier and the ipc socket");
  c.DeclareSize("cpu-capacity", d.storage.cpu.capacity_bytes, "CPU tier bytes", {.min = kMiB});
  c.DeclareSize("disk-capacity", disk.capacity_bytes, "Disk tier bytes", {.min = kMiB});
  c.DeclareBool("disk", true, "Run the disk tier");
  c.DeclareBool("prefault", d.storage.cpu.prefault,
                "Fault the CPU arena in at start, on a thread (the node serves meanwhile), so "
                "stores and pulls do not pay page faults");
  c.DeclareBool("zero-copy", d.zero_copy.enabled,
                "Lend the CPU arena to clients on this host (a unix socket beside the ipc one)");
  c.DeclareDuration("lease-ttl", d.zero_copy.lease_ttl,
                    "How long a local client may hold a lent object or reserved space",
                    {.min = 100, .max = 3'600'000});
  c.Declare("redis", K::kString, "", "Redis host:port for the remote tier (empty: none)");
  c.Declare("redis-namespace", K::kString, remote.key_namespace, "Key namespace in Redis");
  c.Declare("redis-password", K::kSecret, "",
            "Redis password, sent with AUTH (prefer PIKV_REDIS_PASSWORD or the config file: "
            "a flag shows in ps)");
  c.DeclareDuration("redis-ttl", std::chrono::seconds(remote.ttl_seconds),
                    "Time before Redis expires an object (0s = never)",
                    {.min = 0, .max = int64_t{UINT32_MAX} * 1000});
  c.DeclareInt("workers", d.workers, "Worker threads for local requests (disk, Redis, puts)",
               {.min = 1, .max = 256});
  c.DeclareInt("pull-workers", d.pull_workers, "Threads for P2P pulls (they wait on peers)",
               {.min = 1, .max = 256});
  c.DeclareInt("max-pulls-in-flight", d.max_pulls_in_flight,
               "Pulls queued or running before more are answered 'retry'",
               {.min = 1, .max = 65536});
  c.DeclareSize("pull-stream-frame", d.pull_stream_frame,
                "Frames a P2P pull asks its peer to stream objects in (0: one frame per object)",
                {.min = pikv::kMinStreamFrame, .max = pikv::kMaxStreamFrame, .or_zero = true});
  c.DeclareSize("max-object-size", d.limits.max_payload_bytes, "Largest chunk object accepted",
                {.min = 4096});
  c.Declare("controller", K::kString, "tcp://127.0.0.1:7300",
            "Controller to report to: an endpoint, a list tcp://a,tcp://b of standbys, or "
            "etcd://h1:2379,h2:2379[/cluster] (empty: none)");
  c.DeclareDuration("heartbeat-interval", reporter.heartbeat_interval, "Heartbeat period",
                    {.min = 10, .max = 60'000});
  c.Declare("host", K::kString, "",
            "Host name reported to the controller (default: this machine's)");
  c.Declare("http", K::kString, "",
            "host:port for /metrics and /healthz (empty: off; port 0: any)");
  c.Declare("tenant", K::kString, "",
            "The tenant of clients without a key of their own (ipc; all, with security off): "
            "they see and write only its objects (empty: the default tenant)");
  pikv::DeclareCurveSettings(c);
  c.Declare("log-level", K::kString, "info", "trace, debug, info, warn, error");
  return c;
}

// The node's options from its settings (everything but logging); an
// InvalidArgument for a setting that does not parse.
pikv::Result<pikv::node::NodeOptions> OptionsFrom(const pikv::Config& config) {
  pikv::node::NodeOptions options;
  const std::string data_dir = config.String("data-dir");
  options.node_id = config.String("node-id");
  options.workers = static_cast<int>(config.Int("workers"));
  options.pull_workers = static_cast<int>(config.Int("pull-workers"));
  options.max_pulls_in_flight = static_cast<int>(config.Int("max-pulls-in-flight"));
  options.pull_stream_frame = config.Size("pull-stream-frame");
  options.http = config.String("http");
  options.tenant = config.String("tenant");
  options.storage.cpu.capacity_bytes = config.Size("cpu-capacity");
  options.storage.cpu.prefault = config.Bool("prefault");
  options.limits.max_payload_bytes = config.Size("max-object-size");
  if (config.Bool("disk")) {
    options.storage.disk =
        pikv::storage::DiskTierOptions{.path = (std::filesystem::path(data_dir) / "disk").string(),
                                       .capacity_bytes = config.Size("disk-capacity")};
  }
  if (!config.String("redis").empty()) {
    auto remote = pikv::storage::ParseRedisAddress(config.String("redis"));
    if (!remote.ok()) return pikv::InvalidArgument("redis: " + remote.status().message());
    remote->key_namespace = config.String("redis-namespace");
    remote->password = config.String("redis-password");
    remote->ttl_seconds =
        static_cast<uint32_t>(config.Duration("redis-ttl").count() / 1000);  // ranged
    options.storage.remote = *remote;
  }
  if (!config.String("controller").empty()) {
    pikv::node::ReporterOptions r;
    r.controller = config.String("controller");
    r.host = config.String("host");
    r.heartbeat_interval = config.Duration("heartbeat-interval");
    options.reporter = r;
  }
  options.endpoints = config.List("endpoint");
  if (options.endpoints.empty()) {
    options.endpoints = {"tcp://127.0.0.1:7400",
                         "ipc://" + (std::filesystem::absolute(data_dir) / "node.sock").string()};
  }
  options.zero_copy.enabled = config.Bool("zero-copy");
  options.zero_copy.lease_ttl = config.Duration("lease-ttl");
  auto security = pikv::CurveSecurityFrom(config);
  if (!security.ok()) return security.status();
  options.security = *security;
  return options;
}

// Serves until SIGTERM or SIGINT; prints what it bound for whoever started it.
int Serve(const pikv::node::NodeOptions& options, const sigset_t& stop_signals) {
  auto server = pikv::node::NodeServer::Start(options);
  if (!server.ok()) {
    spdlog::error("pikv-node failed to start: {}", server.status().ToString());
    return 1;
  }
  for (const auto& ep : (*server)->endpoints()) std::cout << "endpoint " << ep << "\n";
  if (!(*server)->http_address().empty()) std::cout << "http " << (*server)->http_address() << "\n";
  if (!(*server)->zero_copy_path().empty())
    std::cout << "zero-copy " << (*server)->zero_copy_path() << "\n";
  std::cout << "pikv-node " << (*server)->node_id() << " ready\n";
  std::cout << std::flush;

  const int sig = pikv::WaitForStopSignal(stop_signals);
  spdlog::info("signal {}: shutting down", sig);
  (*server)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pikv-node: per-host KV chunk cache agent (CPU, RocksDB and Redis tiers)"};
  app.set_version_flag("--version", pikv::VersionLine("pikv-node"));
  pikv::Config config = NodeConfig();
  if (auto exit = pikv::ParseCommandLine(app, config, "pikv-node", argc, argv)) return *exit;
  auto options = OptionsFrom(config);
  if (!options.ok()) {
    std::cerr << "pikv-node: " << options.status().message() << "\n";
    return 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("pikv-node"));
  spdlog::set_level(spdlog::level::from_str(config.String("log-level")));
  const std::string data_dir = config.String("data-dir");
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    spdlog::error("cannot create data dir {}: {}", data_dir, ec.message());
    return 1;
  }
  // Large request frames are malloc'd by ZeroMQ; keep freed ones in the heap
  // instead of returning them to the kernel, so steady-state puts do not page
  // fault on every object.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const sigset_t stop_signals = pikv::BlockStopSignals();  // before any thread starts
  return Serve(*options, stop_signals);
}
