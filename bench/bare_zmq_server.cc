#include "bare_zmq_server.h"

#include <malloc.h>

#include <cstring>
#include <iostream>
#include <map>
#include <zmq.hpp>

#include "pikv/transport/zmq_frames.h"

namespace pikv::bench {
namespace {

// Streams `object` to `id` in slices of `frame` bytes, each its own message.
void Stream(zmq::socket_t& router, const zmq::message_t& id, const std::vector<uint8_t>& object,
            uint64_t frame) {
  for (uint64_t off = 0; off < object.size(); off += frame) {
    const uint64_t n = std::min<uint64_t>(frame, object.size() - off);
    zmq::message_t to(id.data(), id.size());
    router.send(to, zmq::send_flags::sndmore);
    zmq::message_t slice(const_cast<uint8_t*>(object.data()) + off, n, nullptr);  // never freed
    router.send(slice, zmq::send_flags::none);
  }
}

}  // namespace

int ServeBareZmq(const std::vector<std::string>& endpoints) {
  // Same allocator setting as pikv-node, so the ceiling is not handicapped.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::sndhwm, 1 << 20);  // a whole stream queues, as a node's does
  std::vector<std::string> bound;
  for (const auto& ep : endpoints) {
    router.bind(ep);
    bound.push_back(router.get(zmq::sockopt::last_endpoint));
  }
  for (const auto& ep : bound) std::cout << "endpoint " << ep << "\n";
  std::cout << "zmq-echo ready" << std::endl;
  // (size, index) -> a preallocated buffer, made on first use.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<uint8_t>> objects;
  std::vector<zmq::message_t> frames;
  while (RecvFrames(router, frames)) {
    if (frames.size() < 2 || frames[1].size() < 1) continue;
    const char* request = static_cast<const char*>(frames[1].data());
    const char op = request[0];
    uint64_t size = 0, arg = 0;
    if ((op == 'G' || op == 'S') && frames[1].size() == 17) {
      std::memcpy(&size, request + 1, 8);
      std::memcpy(&arg, request + 9, 8);
    } else {
      router.send(frames[0], zmq::send_flags::sndmore);
      router.send(zmq::str_buffer("ok"), zmq::send_flags::none);
      continue;
    }
    auto& object = objects[{size, op == 'G' ? arg : 0}];
    if (object.empty()) object.assign(size, 0x5a);
    zmq::message_t id(frames[0].data(), frames[0].size());
    router.send(frames[0], zmq::send_flags::sndmore);
    if (op == 'S' && arg > 0) {
      router.send(zmq::str_buffer("h"), zmq::send_flags::none);
      Stream(router, id, object, arg);
    } else {
      router.send(zmq::str_buffer("h"), zmq::send_flags::sndmore);
      zmq::message_t body(object.data(), object.size(), nullptr);  // zero-copy, never freed
      router.send(body, zmq::send_flags::none);
    }
  }
  return 0;
}

namespace {
std::vector<std::string> ServeArgs(const std::vector<std::string>& endpoints) {
  std::vector<std::string> args = {"--serve-zmq"};
  args.insert(args.end(), endpoints.begin(), endpoints.end());
  return args;
}
}  // namespace

BareZmqServer::BareZmqServer(const std::vector<std::string>& endpoints)
    : process_("/proc/self/exe", ServeArgs(endpoints)) {
  while (auto line = process_.ReadLine(std::chrono::seconds(10))) {
    if (line->starts_with("endpoint ")) endpoints_.push_back(line->substr(9));
    if (*line == "zmq-echo ready") break;
  }
  if (endpoints_.size() != endpoints.size())
    throw std::runtime_error("the bare ZeroMQ server did not start");
}

}  // namespace pikv::bench
