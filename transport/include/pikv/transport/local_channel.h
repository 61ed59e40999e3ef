// LocalChannel: pikv messages over a unix stream socket between a node and
// the clients on its host, with a file descriptor passed alongside.
//
// ZeroMQ cannot pass descriptors, so the zero-copy path (a node lending its
// CPU arena to local clients) has this channel of its own: each message is a
// 4-byte little-endian length and an encoded Header (message.h), checked
// against WireLimits before anything is allocated; the one descriptor a
// message may carry travels as SCM_RIGHTS. Descriptors a receiver did not
// ask for are closed, never leaked. The socket lives beside the node's ipc
// endpoint (ZeroCopySocketFor), so a client that knows one knows the other.
// Blocking I/O: callers bound it with SO_RCVTIMEO / SO_SNDTIMEO.
// Thread-safety: pure functions; one reader and one writer per socket.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "pikv/proto/message.h"

namespace pikv {

// ipc://PATH -> PATH.zc; empty when `endpoint` is not ipc or the path would
// not fit a unix socket address.
std::string ZeroCopySocketFor(std::string_view endpoint);

// Sends one message, with `pass_fd` attached when it is >= 0.
Status SendLocal(int socket, const Header& header, int pass_fd = -1);
// Receives one message. `received_fd` (when given) gets the descriptor that
// came with it, or -1; kUnavailable when the peer closed, kTimeout when the
// socket's receive timeout passed.
Result<Header> RecvLocal(int socket, const WireLimits& limits, int* received_fd = nullptr);

// A connected client socket to the unix socket at `path`, with both timeouts
// set; the caller closes it.
Result<int> ConnectLocal(const std::string& path, std::chrono::milliseconds timeout);
// Sets the socket's send and receive timeouts.
void SetLocalTimeout(int socket, std::chrono::milliseconds timeout);

}  // namespace pikv
