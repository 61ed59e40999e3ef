// pikv-node: the per-host agent. Flags only for now; YAML and env follow the
// configuration issue. Prints "endpoint <url>" per bound endpoint, then
// "pikv-node <id> ready", then serves until SIGTERM or SIGINT, and exits 0 after a clean shutdown.
#include <malloc.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "pikv/node/node_server.h"
#include "pikv/proto/stop_signal.h"
#include "pikv/proto/units.h"

namespace {

uint64_t SizeOrDie(const std::string& flag, const std::string& text) {
  auto v = pikv::ParseByteSize(text);
  if (!v.ok()) throw CLI::ValidationError(flag, v.status().message());
  return *v;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pikv-node: per-host KV chunk cache agent (CPU, RocksDB and Redis tiers)"};
  pikv::node::NodeOptions options;
  std::string data_dir = "./data";
  std::vector<std::string> endpoints;
  std::string cpu_capacity = "1GiB", disk_capacity = "16GiB", max_object = "1GiB";
  std::string redis, redis_namespace = "default", log_level = "info";
  uint32_t redis_ttl = 0;
  bool no_disk = false, prefault = false;
  std::string controller, heartbeat = "1s", host;
  app.add_option("--endpoint", endpoints,
                 "Endpoint to serve (repeatable). Default: tcp://127.0.0.1:7400 and "
                 "ipc://<data-dir>/node.sock");
  app.add_option("--node-id", options.node_id, "Node id (default: host name)");
  app.add_option("--data-dir", data_dir, "Directory for the disk tier and the ipc socket")
      ->capture_default_str();
  app.add_option("--cpu-capacity", cpu_capacity, "CPU tier bytes, e.g. 8GiB")
      ->capture_default_str();
  app.add_option("--disk-capacity", disk_capacity, "Disk tier bytes, e.g. 500GiB")
      ->capture_default_str();
  app.add_flag("--no-disk", no_disk, "Run without the disk tier");
  app.add_flag("--prefault", prefault, "Fault in the CPU arena at start (no page faults later)");
  app.add_option("--redis", redis, "Redis address host:port for the shared tier (default: none)");
  app.add_option("--redis-namespace", redis_namespace, "Key namespace in Redis")
      ->capture_default_str();
  app.add_option("--redis-ttl", redis_ttl, "Seconds before Redis expires an object (0 = never)");
  app.add_option("--workers", options.workers, "Worker threads")->capture_default_str();
  app.add_option("--max-object-size", max_object, "Largest chunk object accepted")
      ->capture_default_str();
  app.add_option("--controller", controller,
                 "Controller endpoint to report to, e.g. tcp://10.0.0.1:7300");
  app.add_option("--heartbeat-interval", heartbeat, "Heartbeat period, e.g. 1s")
      ->capture_default_str();
  app.add_option("--host", host, "Host name reported to the controller (default: this machine's)");
  app.add_option("--http", options.http,
                 "host:port for /metrics and /healthz (default: off; port 0 = any)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
    options.storage.cpu.capacity_bytes = SizeOrDie("--cpu-capacity", cpu_capacity);
    options.storage.cpu.prefault = prefault;
    options.limits.max_payload_bytes = SizeOrDie("--max-object-size", max_object);
    if (!no_disk) {
      pikv::storage::DiskTierOptions disk;
      disk.path = (std::filesystem::path(data_dir) / "disk").string();
      disk.capacity_bytes = SizeOrDie("--disk-capacity", disk_capacity);
      options.storage.disk = disk;
    }
    if (!redis.empty()) {
      auto remote = pikv::storage::ParseRedisAddress(redis);
      if (!remote.ok()) throw CLI::ValidationError("--redis", remote.status().message());
      remote->key_namespace = redis_namespace;
      remote->ttl_seconds = redis_ttl;
      options.storage.remote = *remote;
    }
    if (!controller.empty()) {
      pikv::node::ReporterOptions r;
      r.controller = controller;
      r.host = host;
      auto interval = pikv::ParseDuration(heartbeat);
      if (!interval.ok())
        throw CLI::ValidationError("--heartbeat-interval", interval.status().message());
      r.heartbeat_interval = *interval;
      options.reporter = r;
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // stdout carries only the ready/endpoint lines that scripts parse.
  spdlog::set_default_logger(spdlog::stderr_color_mt("pikv-node"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    spdlog::error("cannot create data dir {}: {}", data_dir, ec.message());
    return 1;
  }
  if (endpoints.empty()) {
    endpoints = {"tcp://127.0.0.1:7400",
                 "ipc://" + (std::filesystem::absolute(data_dir) / "node.sock").string()};
  }
  options.endpoints = endpoints;

  // Large request frames are malloc'd by ZeroMQ; keep freed ones in the heap
  // instead of returning them to the kernel, so steady-state puts do not page
  // fault on every object.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);

  const sigset_t stop_signals = pikv::BlockStopSignals();  // before any thread starts

  auto server = pikv::node::NodeServer::Start(options);
  if (!server.ok()) {
    spdlog::error("pikv-node failed to start: {}", server.status().ToString());
    return 1;
  }
  for (const auto& ep : (*server)->endpoints()) std::cout << "endpoint " << ep << "\n";
  if (!(*server)->http_address().empty()) std::cout << "http " << (*server)->http_address() << "\n";
  std::cout << "pikv-node " << (*server)->node_id() << " ready\n";
  std::cout << std::flush;

  const int sig = pikv::WaitForStopSignal(stop_signals);
  spdlog::info("signal {}: shutting down", sig);
  (*server)->Stop();
  return 0;
}
