#include "sim_node.h"

#include <zmq.hpp>

#include "pikv/proto/control_wire.h"
#include "pikv/proto/location.h"
#include "pikv/transport/zmq_frames.h"

namespace pikv::bench {

ChunkKey SpreadKey(uint64_t i) {
  uint64_t a = i * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
  uint64_t b = (i ^ (i >> 29)) * 0xbf58476d1ce4e5b9ULL + 1;
  return {a ^ (a >> 31), b ^ (b >> 27)};
}

Header AdmitBatch(const std::string& node_id, int64_t incarnation, uint64_t seq, uint64_t first_key,
                  size_t n) {
  NodeReport report;
  report.node_id = node_id;
  report.incarnation = static_cast<uint64_t>(incarnation);
  report.seq = seq;
  for (size_t i = 0; i < n; ++i) {
    report.keys.push_back(SpreadKey(first_key + i));
    report.values.push_back(EncodeEvent(TierKind::kCpu, true));
  }
  return EncodeReport(MsgType::kEvents, std::move(report));
}

bool RegisterSimulatedNode(zmq::socket_t& socket, const std::string& node_id, int64_t incarnation) {
  std::vector<zmq::message_t> none;
  const auto inc = static_cast<uint64_t>(incarnation);
  if (!SendMessage(socket, none, EncodeRegister({node_id, "bench", {}, {}, inc}), {})) return false;
  std::vector<zmq::message_t> reply;
  if (!RecvFrames(socket, reply)) return false;
  NodeReport inventory;
  inventory.node_id = node_id;
  inventory.incarnation = inc;
  inventory.final = true;
  return SendMessage(socket, none, EncodeReport(MsgType::kInventory, std::move(inventory)), {});
}

}  // namespace pikv::bench
