// `pikv demo` and `pikv cluster`: a whole pikv cluster on this machine.
#pragma once

#include "pikv/launch/local_cluster.h"

namespace pikv::cli {

struct DemoOptions {
  launch::LocalClusterOptions cluster;
  int prompts = 40;
  int docs = 24;
  int check_every = 5;  // compare every Nth answer with recomputing
  bool json = false;    // cluster: its processes as one JSON line instead of text
};

// Starts a LocalCluster, runs a RAG workload through one engine per node,
// prints a report, stops every process it started. Returns the exit code: 0
// when every check passed, 1 when one failed or the cluster did not start.
int RunDemo(const DemoOptions& options);
// The same cluster in the foreground until Ctrl-C.
int RunCluster(const DemoOptions& options);

}  // namespace pikv::cli
