#include "pikv/transport/zmq_frames.h"

#include <algorithm>

namespace pikv {

zmq::context_t& ClientContext() {
  static auto* ctx = new zmq::context_t(1);
  return *ctx;
}

zmq::message_t ToFrame(const SharedBuffer& buf) {
  if (buf.size() < 256) return zmq::message_t(buf.data(), buf.size());  // small: copying is cheaper
  auto* keep = new std::shared_ptr<const void>(buf.owner());
  return zmq::message_t(
      const_cast<uint8_t*>(buf.data()), buf.size(),
      [](void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }, keep);
}

SharedBuffer FromFrame(zmq::message_t&& frame) {
  auto owner = std::make_shared<zmq::message_t>(std::move(frame));
  return {static_cast<const uint8_t*>(owner->data()), owner->size(), owner};
}

bool SendMessage(zmq::socket_t& socket, std::vector<zmq::message_t>& routing, const Header& header,
                 const std::vector<SharedBuffer>& payloads, bool dontwait) {
  const auto more =
      dontwait ? zmq::send_flags::sndmore | zmq::send_flags::dontwait : zmq::send_flags::sndmore;
  const auto last = dontwait ? zmq::send_flags::dontwait : zmq::send_flags::none;
  try {
    for (auto& r : routing) {
      if (!socket.send(r, more)) return false;
    }
    std::string encoded = EncodeHeader(header);
    zmq::message_t head(encoded.data(), encoded.size());
    if (!socket.send(head, payloads.empty() ? last : more)) return false;
    for (size_t i = 0; i < payloads.size(); ++i) {
      zmq::message_t f = ToFrame(payloads[i]);
      if (!socket.send(f, i + 1 == payloads.size() ? last : more)) return false;
    }
  } catch (const zmq::error_t&) {
    return false;
  }
  return true;
}

bool SendReply(zmq::socket_t& socket, std::vector<zmq::message_t>& routing, const Header& header,
               const std::vector<SharedBuffer>& payloads) {
  const int64_t frame = StreamFrameOf(header);
  if (frame < kMinStreamFrame || frame > kMaxStreamFrame)
    return SendMessage(socket, routing, header, payloads);
  std::vector<std::string> route;
  for (const auto& r : routing) route.emplace_back(static_cast<const char*>(r.data()), r.size());
  auto routed = [&] {
    std::vector<zmq::message_t> r;
    for (const auto& id : route) r.emplace_back(id.data(), id.size());
    return r;
  };
  if (!SendMessage(socket, routing, header, {})) return false;
  for (const SharedBuffer& p : payloads) {
    for (size_t off = 0; off < p.size(); off += static_cast<size_t>(frame)) {
      const size_t n = std::min(static_cast<size_t>(frame), p.size() - off);
      std::vector<zmq::message_t> r = routed();
      try {
        for (auto& m : r) {
          if (!socket.send(m, zmq::send_flags::sndmore)) return false;
        }
        zmq::message_t f = ToFrame(SharedBuffer(p.data() + off, n, p.owner()));
        if (!socket.send(f, zmq::send_flags::none)) return false;
      } catch (const zmq::error_t&) {
        return false;
      }
    }
  }
  return true;
}

bool RecvFrames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames, zmq::recv_flags flags) {
  frames.clear();
  try {
    do {
      zmq::message_t m;
      if (!socket.recv(m, frames.empty() ? flags : zmq::recv_flags::none)) return false;
      frames.push_back(std::move(m));
    } while (frames.back().more());
  } catch (const zmq::error_t&) {
    return false;
  }
  return true;
}

Result<Message> ParseFrames(std::vector<zmq::message_t>& frames, size_t first,
                            const WireLimits& limits) {
  if (frames.size() <= first) return ProtocolError("message has no header frame");
  std::vector<size_t> sizes;
  sizes.reserve(frames.size() - first - 1);
  for (size_t i = first + 1; i < frames.size(); ++i) sizes.push_back(frames[i].size());
  if (Status s = CheckPayloadLimits(sizes, limits); !s.ok()) return s;
  auto header = DecodeHeader(
      {static_cast<const uint8_t*>(frames[first].data()), frames[first].size()}, limits);
  if (!header.ok()) return header.status();
  Message msg{std::move(*header), {}};
  msg.payloads.reserve(sizes.size());
  for (size_t i = first + 1; i < frames.size(); ++i)
    msg.payloads.push_back(FromFrame(std::move(frames[i])));
  return msg;
}

}  // namespace pikv
