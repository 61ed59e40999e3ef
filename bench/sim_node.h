// A simulated node for the controller benches: it registers with a real
// pikv-controller as a node does (register, then an empty final inventory)
// and reports admits, without holding any bytes. controller_bench and
// bench/peers' lookup client fill registries with it.
#pragma once

#include <cstdint>
#include <string>

#include "pikv/proto/message.h"

namespace zmq {
class socket_t;
}

namespace pikv::bench {

// Distinct, well-spread keys without hashing cost in timed loops.
ChunkKey SpreadKey(uint64_t i);

// The kEvents message admitting SpreadKey(first_key .. first_key + n - 1)
// to the CPU tier of `node_id`, as event batch `seq` of `incarnation`.
Header AdmitBatch(const std::string& node_id, int64_t incarnation, uint64_t seq, uint64_t first_key,
                  size_t n);

// Registers `node_id` (as `incarnation`) over `socket`, a DEALER connected
// to the controller, and sends its empty final inventory; false when the
// controller did not answer the registration.
bool RegisterSimulatedNode(zmq::socket_t& socket, const std::string& node_id, int64_t incarnation);

}  // namespace pikv::bench
