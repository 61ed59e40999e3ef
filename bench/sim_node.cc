#include "sim_node.h"

#include <zmq.hpp>

#include "pikv/proto/location.h"
#include "pikv/proto/zmq_frames.h"

namespace pikv::bench {

ChunkKey SpreadKey(uint64_t i) {
  uint64_t a = i * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
  uint64_t b = (i ^ (i >> 29)) * 0xbf58476d1ce4e5b9ULL + 1;
  return {a ^ (a >> 31), b ^ (b >> 27)};
}

Header AdmitBatch(const std::string& node_id, int64_t incarnation, uint64_t seq, uint64_t first_key,
                  size_t n) {
  Header h;
  h.type = MsgType::kEvents;
  h.fields = {
      {"node_id", node_id}, {"incarnation", incarnation}, {"seq", static_cast<int64_t>(seq)}};
  for (size_t i = 0; i < n; ++i) {
    h.keys.push_back(SpreadKey(first_key + i));
    h.values.push_back(EncodeEvent(TierKind::kCpu, true));
  }
  return h;
}

bool RegisterSimulatedNode(zmq::socket_t& socket, const std::string& node_id, int64_t incarnation) {
  std::vector<zmq::message_t> none;
  Header reg;
  reg.type = MsgType::kRegister;
  reg.fields = {{"node_id", node_id}, {"incarnation", incarnation}, {"host", std::string("bench")}};
  if (!SendMessage(socket, none, reg, {})) return false;
  std::vector<zmq::message_t> reply;
  if (!RecvFrames(socket, reply)) return false;
  Header inv;
  inv.type = MsgType::kInventory;
  inv.fields = {{"node_id", node_id},
                {"incarnation", incarnation},
                {"seq", int64_t{0}},
                {"final", int64_t{1}}};
  return SendMessage(socket, none, inv, {});
}

}  // namespace pikv::bench
