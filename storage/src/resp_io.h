// Values moved straight between a Redis socket and their own memory.
//
// hiredis (0.14, Debian 12's) formats a command into one buffer and appends
// that to its output buffer (two copies of the value), and reads a reply 16
// KiB per read() into a buffer it grows in 1 MiB steps, then copies the
// value out: a 256 MiB part cost ~1 s each way. Here a command goes out in
// one writev from the value's own memory, and a bulk reply is read straight
// into the memory it ends in (a part straight into its place in the object).
// The remote tier uses these for SET and GET only; hiredis keeps the small
// commands, on the same socket, never with bytes of ours in flight.
//
// What Redis sends is not trusted: a reply is parsed strictly, a value larger
// than the caller allows is read and dropped (the connection stays usable),
// anything else malformed is an error after which the connection must go.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/shared_buffer.h"

namespace pikv::storage::resp {

// Uninitialised memory for a value of `size` bytes (large ones mapped with
// their pages already present); empty when the system has none.
SharedBuffer AllocateValue(uint64_t size);

// Writes one command (RESP array of bulk strings) to `fd`; any argument may
// be large and goes out from where it is. Blocking, with the socket's own
// send timeout.
Status WriteCommand(int fd, std::span<const std::string_view> args);

// One reply of a GET-like command.
struct BulkReply {
  enum class Kind { kValue, kNil, kError, kStatus, kTooLarge, kWrongSize } kind = Kind::kNil;
  SharedBuffer value;  // kValue: the bytes (in `into` when one was given)
  std::string line;    // kError, kStatus: the text after '-' or '+'
};

// Reads replies from one socket; holds the bytes read past the current
// reply until the next. A reader lives for one exchange of commands and
// their replies: empty() at its end says the exchange was whole.
class Reader {
 public:
  explicit Reader(int fd) : fd_(fd) {}

  // A bulk string of at most `max_bytes` (a larger one is read and dropped:
  // kTooLarge); a nil; an error or status line. With `into`, a value of
  // exactly into.size() bytes lands there (another size is dropped:
  // kWrongSize). Any other reply, or a malformed one, is an error Status.
  Result<BulkReply> ReadBulk(uint64_t max_bytes, std::span<uint8_t> into = {});
  // Where a value of `size` bytes is to land: memory of the caller's of
  // exactly that size (the reply's value then owns nothing), or an empty
  // span for memory of the reader's own.
  using Placer = std::function<std::span<uint8_t>(uint64_t size)>;
  // ReadBulk with the value's memory chosen by `place` once its size is known.
  Result<BulkReply> ReadBulkPlaced(uint64_t max_bytes, const Placer& place);
  // A status (+OK) or error line; anything else is an error Status.
  Result<BulkReply> ReadStatus();
  bool empty() const { return begin_ == end_; }

 private:
  Result<BulkReply> ReadBulkInto(uint64_t max_bytes, std::span<uint8_t> into, const Placer* place);
  Result<std::string> ReadLine();
  // Exactly out.size() bytes: what is buffered, then straight from the socket.
  Status ReadExact(std::span<uint8_t> out);
  Status Discard(uint64_t bytes);
  Status Fill();

  int fd_;
  std::vector<uint8_t> buffer_ = std::vector<uint8_t>(16 << 10);
  size_t begin_ = 0, end_ = 0;  // unread bytes: buffer_[begin_, end_)
};

}  // namespace pikv::storage::resp
