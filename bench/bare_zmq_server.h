// The bare ZeroMQ server that benchmarks measure pikv-node against: the
// transport's ceiling, in a process of its own as a node is (a sender and a
// receiver in one process share one ZeroMQ I/O thread, which no pikv
// transfer can; measured: a 512 MiB stream 1.3x faster than between two
// processes). The binary that links this runs it when asked (--serve-zmq);
// the benchmark starts itself as the child.
//
// Requests, one frame (a DEALER's, so the server sees [id][request]):
//   'G' size:u64 index:u64   -> [id]["h"][object]       a whole object
//   'S' size:u64 frame:u64   -> [id]["h"], then [id][slice] per frame of the
//                               object, as a node streams a get or a pull
//   anything else            -> [id]["ok"]              (a put's ack)
// Objects are preallocated per (size, index), faulted in, and sent zero-copy.
#pragma once

#include <string>
#include <vector>

#include "test_support.h"

namespace pikv::bench {

// Serves on `endpoints` until the process is killed; prints "endpoint <ep>"
// per bound endpoint, then "zmq-echo ready".
int ServeBareZmq(const std::vector<std::string>& endpoints);

// This binary started again with --serve-zmq on `endpoints` (killed when
// this goes). Throws if it does not come up.
class BareZmqServer {
 public:
  explicit BareZmqServer(const std::vector<std::string>& endpoints);
  // The bound endpoints, in the order asked for.
  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  testing::ChildProcess process_;
  std::vector<std::string> endpoints_;
};

}  // namespace pikv::bench
