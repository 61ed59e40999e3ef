// Moving pikv messages in and out of ZeroMQ frames without copying payloads.
//
// Include only from .cc files that already talk ZeroMQ: it pulls in cppzmq.
// Sent payload frames borrow the SharedBuffer's bytes and keep its owner alive
// until ZeroMQ has finished with them; received frames become SharedBuffers
// that own the zmq message.
#pragma once

#include <vector>
#include <zmq.hpp>

#include "pikv/proto/message.h"

namespace pikv {

// The process-wide context for client sockets (never destroyed, so exit never
// blocks on a socket someone forgot to close).
zmq::context_t& ClientContext();

// Zero-copy: the frame references `buf`'s bytes and holds its owner.
zmq::message_t ToFrame(const SharedBuffer& buf);
SharedBuffer FromFrame(zmq::message_t&& frame);

// Sends routing frames (may be empty), the encoded header, then payloads.
// Returns false if the socket would block (dontwait) or failed.
bool SendMessage(zmq::socket_t& socket, std::vector<zmq::message_t>& routing, const Header& header,
                 const std::vector<SharedBuffer>& payloads, bool dontwait = false);

// A reply that asks to be streamed (StreamFrameOf, message.h) goes out
// as its header message, then each payload in messages of that many bytes
// (zero-copy slices), each behind a copy of `routing`; any other reply as
// SendMessage sends it.
bool SendReply(zmq::socket_t& socket, std::vector<zmq::message_t>& routing, const Header& header,
               const std::vector<SharedBuffer>& payloads);

// Receives every frame of one multipart message (blocking per `flags`).
// Returns false when nothing was received.
bool RecvFrames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames,
                zmq::recv_flags flags = zmq::recv_flags::none);

// Decodes frames[first] as the header and the rest as payloads, with limits.
Result<Message> ParseFrames(std::vector<zmq::message_t>& frames, size_t first,
                            const WireLimits& limits);

}  // namespace pikv
