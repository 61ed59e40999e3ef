// `pikv demo` and `pikv cluster`: a whole pikv cluster on this machine.
#pragma once

#include <string>

namespace pikv::cli {

struct DemoOptions {
  int nodes = 3;
  int prompts = 40;
  int docs = 24;
  int check_every = 5;         // compare every Nth answer with recomputing
  std::string redis = "auto";  // auto (start one if redis-server is installed), off, or host:port
  bool keep = false;           // keep the temp dir
};

// Starts a controller, nodes (and Redis) as child processes on loopback, runs
// a RAG workload through one engine per node, prints a report, stops every
// process it started. Returns the exit code (0 when every check passed).
int RunDemo(const DemoOptions& options);
// The same cluster in the foreground until Ctrl-C.
int RunCluster(const DemoOptions& options);

}  // namespace pikv::cli
