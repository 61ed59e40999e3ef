// pikv-controller: the cluster's registry of who holds what. Prints
// "endpoint <url>" and "http <host:port>", then "pikv-controller ready", and
// serves until SIGTERM or SIGINT.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "pikv/common/config_cli.h"
#include "pikv/common/stop_signal.h"
#include "pikv/common/units.h"
#include "pikv/common/version.h"
#include "pikv/controller/controller_server.h"
#include "pikv/coord/etcd_client.h"

int main(int argc, char** argv) {
  CLI::App app{"pikv-controller: global registry of KV chunks, node lifecycle, locate and admin"};
  app.set_version_flag("--version", pikv::VersionLine("pikv-controller"));
  using K = pikv::Config::Kind;
  pikv::Config config;
  const pikv::controller::ControllerOptions d;  // each setting's default, written there once
  config.Declare("endpoint", K::kString, d.endpoint,
                 "ZeroMQ endpoint for nodes, clients and the CLI");
  config.Declare("http", K::kString, d.http,
                 "host:port for read-only HTTP (empty: off; port 0: any)");
  config.DeclareDuration("suspect-after", d.lifecycle.suspect_after,
                         "Silence before a node is suspect", {.min = 100, .max = 3'600'000});
  config.DeclareDuration("dead-after", d.lifecycle.dead_after,
                         "Silence before a node is dead and its entries removed",
                         {.min = 200, .max = 86'400'000});
  config.Declare("etcd", K::kString, "",
                 "etcd members (host:port,...) that elect the leader among standbys (empty: run "
                 "alone)");
  config.Declare("etcd-tls", K::kString, "",
                 "Directory of etcd's CA and pikv's client certificate (ca.crt, client.crt, "
                 "client.key: pikv etcd-certs); etcd is then reached over https (empty: http)");
  config.Declare("cluster", K::kString, d.cluster,
                 "Cluster name: the etcd keys pikv/<cluster>/...");
  config.Declare("trust-file", K::kString, "",
                 "Without etcd: the file keeping revocations and confirmed audit counts across "
                 "restarts, replaced atomically (empty: memory only; with etcd they are kept "
                 "there)");
  config.DeclareDuration("lease-ttl", d.lease_ttl,
                         "Leader lease (whole seconds): failover takes about this long",
                         {.min = 2000, .max = 60'000});
  config.Declare("advertise", K::kString, "",
                 "Endpoint other processes dial this controller at (default: as bound)");
  config.Declare("advertise-http", K::kString, "",
                 "HTTP address to publish for this controller (default: as bound)");
  pikv::DeclareCurveSettings(config);
  config.Declare("log-level", K::kString, "info", "trace, debug, info, warn, error");
  if (auto exit = pikv::ParseCommandLine(app, config, "pikv-controller", argc, argv)) return *exit;
  if (config.Duration("dead-after") <= config.Duration("suspect-after")) {
    std::cerr << "pikv-controller: dead-after must be longer than suspect-after\n";
    return 2;
  }
  pikv::controller::ControllerOptions options;
  options.endpoint = config.String("endpoint");
  options.http = config.String("http");
  options.lifecycle = {config.Duration("suspect-after"), config.Duration("dead-after")};
  if (!config.String("etcd").empty()) {
    auto etcd = pikv::coord::EtcdAccess::Parse(config.String("etcd"), config.String("etcd-tls"));
    if (!etcd.ok()) {
      std::cerr << "pikv-controller: " << etcd.status().message() << "\n";
      return 2;
    }
    options.etcd = std::move(*etcd);
  }
  options.cluster = config.String("cluster");
  options.trust_file = config.String("trust-file");
  if (!options.trust_file.empty() && !options.etcd.empty()) {
    std::cerr << "pikv-controller: trust-file is for a controller without etcd (with etcd the "
                 "record is kept there)\n";
    return 2;
  }
  options.lease_ttl = config.Duration("lease-ttl");
  options.advertise = config.String("advertise");
  options.advertise_http = config.String("advertise-http");
  const std::string log_level = config.String("log-level");
  spdlog::set_default_logger(spdlog::stderr_color_mt("pikv-controller"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  auto security = pikv::CurveSecurityFrom(config);
  if (!security.ok()) {
    spdlog::error("pikv-controller: {}", security.status().ToString());
    return 2;
  }
  options.security = *security;

  const sigset_t stop_signals = pikv::BlockStopSignals();  // before any thread starts

  auto server = pikv::controller::ControllerServer::Start(options);
  if (!server.ok()) {
    spdlog::error("pikv-controller failed to start: {}", server.status().ToString());
    return 1;
  }
  std::cout << "endpoint " << (*server)->endpoint() << "\n";
  if (!(*server)->http_address().empty()) std::cout << "http " << (*server)->http_address() << "\n";
  std::cout << "pikv-controller ready" << std::endl;
  const int sig = pikv::WaitForStopSignal(stop_signals);
  spdlog::info("signal {}: shutting down", sig);
  (*server)->Stop();
  return 0;
}
