// pikv-controller: the cluster's registry of who holds what. Prints
// "endpoint <url>" and "http <host:port>", then "pikv-controller ready", and
// serves until SIGTERM or SIGINT.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "pikv/controller/controller_server.h"
#include "pikv/proto/stop_signal.h"
#include "pikv/proto/units.h"

int main(int argc, char** argv) {
  CLI::App app{"pikv-controller: global registry of KV chunks, node lifecycle, locate and admin"};
  pikv::controller::ControllerOptions options;
  std::string suspect = "2500ms", dead = "5s", log_level = "info";
  app.add_option("--endpoint", options.endpoint, "ZeroMQ endpoint for nodes, clients and the CLI")
      ->capture_default_str();
  app.add_option("--http", options.http,
                 "host:port for read-only HTTP (/metrics, /healthz, ...); '' = off")
      ->capture_default_str();
  app.add_option("--suspect-after", suspect, "Silence before a node is suspect")
      ->capture_default_str();
  app.add_option("--dead-after", dead, "Silence before a node is dead and its entries removed")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
    auto s = pikv::ParseDuration(suspect);
    if (!s.ok()) throw CLI::ValidationError("--suspect-after", s.status().message());
    auto d = pikv::ParseDuration(dead);
    if (!d.ok()) throw CLI::ValidationError("--dead-after", d.status().message());
    if (*d <= *s) throw CLI::ValidationError("--dead-after", "must be longer than --suspect-after");
    options.lifecycle = {*s, *d};
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("pikv-controller"));
  spdlog::set_level(spdlog::level::from_str(log_level));

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
