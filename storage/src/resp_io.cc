#include "resp_io.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

namespace pikv::storage::resp {

namespace {

// Arguments this long go out from their own memory; shorter ones are copied
// into the command's text.
constexpr size_t kInlineArgBytes = 4096;
// Longest reply line accepted (Redis's error texts are well under it).
constexpr size_t kMaxLineBytes = 4096;
// Values this large get pages mapped in one call rather than one fault per
// page as the socket fills them (2-3x cheaper here: 512 MiB took 230-530 ms
// faulted, 190-240 ms populated).
constexpr uint64_t kPopulatedBytes = 16 << 20;
constexpr uint64_t kMaxBulkBytes = uint64_t{1} << 40;

Status SocketError(const char* what) {
  if (errno == EAGAIN || errno == EWOULDBLOCK) return Timeout(std::string("Redis ") + what);
  return IoError(std::string("Redis ") + what + ": " + std::strerror(errno));
}

}  // namespace

SharedBuffer AllocateValue(uint64_t size) {
  if (size < kPopulatedBytes) {
    try {
      std::shared_ptr<uint8_t[]> bytes = std::make_shared_for_overwrite<uint8_t[]>(size);
      return SharedBuffer(bytes.get(), size, bytes);
    } catch (const std::bad_alloc&) {
      return {};
    }
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) return {};
  std::shared_ptr<const void> owner(p,
                                    [size](const void* q) { munmap(const_cast<void*>(q), size); });
  return SharedBuffer(static_cast<const uint8_t*>(p), size, std::move(owner));
}

Status WriteCommand(int fd, std::span<const std::string_view> args) {
  // Text pieces and large arguments, in wire order; iovecs point into
  // `text`, so it is sized before any is taken.
  std::string text;
  std::vector<std::pair<size_t, size_t>> text_spans;  // (offset, length) in text
  std::vector<iovec> iov;
  auto add_text = [&](std::string_view piece) {
    if (!text_spans.empty() && iov.back().iov_base == nullptr) {
      text_spans.back().second += piece.size();
    } else {
      text_spans.push_back({text.size(), piece.size()});
      iov.push_back({nullptr, 0});  // filled in below
    }
    text += piece;
  };
  add_text("*" + std::to_string(args.size()) + "\r\n");
  for (std::string_view a : args) {
    add_text("$" + std::to_string(a.size()) + "\r\n");
    if (a.size() < kInlineArgBytes) {
      add_text(a);
    } else {
      iov.push_back({const_cast<char*>(a.data()), a.size()});
    }
    add_text("\r\n");
  }
  for (size_t i = 0, t = 0; i < iov.size(); ++i) {
    if (iov[i].iov_base != nullptr) continue;
    iov[i] = {text.data() + text_spans[t].first, text_spans[t].second};
    ++t;
  }
  size_t first = 0;
  while (first < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + first;
    msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
    const ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SocketError("write");
    }
    auto left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return Status::Ok();
}

Status Reader::Fill() {
  if (begin_ == end_) begin_ = end_ = 0;
  if (end_ == buffer_.size()) {  // a line's start is buffered: keep it, make room
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  for (;;) {
    const ssize_t n = recv(fd_, buffer_.data() + end_, buffer_.size() - end_, 0);
    if (n > 0) {
      end_ += static_cast<size_t>(n);
      return Status::Ok();
    }
    if (n == 0) return IoError("Redis closed the connection");
    if (errno != EINTR) return SocketError("read");
  }
}

Result<std::string> Reader::ReadLine() {
  for (size_t scanned = begin_;;) {
    const auto* at =
        static_cast<const uint8_t*>(std::memchr(buffer_.data() + scanned, '\n', end_ - scanned));
    if (at != nullptr) {
      const auto end = static_cast<size_t>(at - buffer_.data());
      if (end == begin_ || buffer_[end - 1] != '\r') return ProtocolError("Redis: bare newline");
      std::string line(reinterpret_cast<const char*>(buffer_.data() + begin_), end - 1 - begin_);
      begin_ = end + 1;
      return line;
    }
    if (end_ - begin_ > kMaxLineBytes) return ProtocolError("Redis: reply line too long");
    const size_t kept = end_ - begin_;
    if (Status s = Fill(); !s.ok()) return s;
    scanned = begin_ + kept;  // Fill may have moved the line to the front
  }
}

Status Reader::ReadExact(std::span<uint8_t> out) {
  const size_t buffered = std::min(out.size(), end_ - begin_);
  std::memcpy(out.data(), buffer_.data() + begin_, buffered);
  begin_ += buffered;
  for (size_t got = buffered; got < out.size();) {
    const ssize_t n = recv(fd_, out.data() + got, out.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      return IoError("Redis closed the connection");
    } else if (errno != EINTR) {
      return SocketError("read");
    }
  }
  return Status::Ok();
}

Status Reader::Discard(uint64_t bytes) {
  std::vector<uint8_t> scratch(std::min<uint64_t>(bytes, 1 << 20));
  while (bytes > 0) {
    const auto n = std::min<uint64_t>(bytes, scratch.size());
    if (Status s = ReadExact({scratch.data(), n}); !s.ok()) return s;
    bytes -= n;
  }
  return Status::Ok();
}

Result<BulkReply> Reader::ReadBulk(uint64_t max_bytes, std::span<uint8_t> into) {
  return ReadBulkInto(max_bytes, into, nullptr);
}

Result<BulkReply> Reader::ReadBulkPlaced(uint64_t max_bytes, const Placer& place) {
  return ReadBulkInto(max_bytes, {}, &place);
}

Result<BulkReply> Reader::ReadBulkInto(uint64_t max_bytes, std::span<uint8_t> into,
                                       const Placer* place) {
  auto line = ReadLine();
  if (!line.ok()) return line.status();
  BulkReply reply;
  if (line->empty()) return ProtocolError("Redis: empty reply line");
  const char type = (*line)[0];
  if (type == '-' || type == '+') {
    reply.kind = type == '-' ? BulkReply::Kind::kError : BulkReply::Kind::kStatus;
    reply.line = line->substr(1);
    return reply;
  }
  if (type != '$') return ProtocolError("Redis: a bulk reply was expected");
  if (*line == "$-1") return reply;  // nil
  uint64_t size = 0;
  const char* first = line->data() + 1;
  const char* last = line->data() + line->size();
  auto [end, ec] = std::from_chars(first, last, size);
  if (ec != std::errc() || end != last || first == last || *first == '-')
    return ProtocolError("Redis: malformed bulk length");
  // Past what any Redis stores in one value (proto-max-bulk-len tops out
  // below it): not read through, the connection is dropped.
  if (size > kMaxBulkBytes) return ProtocolError("Redis: bulk length past any value's");
  if (size > max_bytes || (!into.empty() && size != into.size())) {
    if (Status s = Discard(size + 2); !s.ok()) return s;
    reply.kind = size > max_bytes ? BulkReply::Kind::kTooLarge : BulkReply::Kind::kWrongSize;
    return reply;
  }
  if (into.empty() && place && size > 0) {
    if (std::span<uint8_t> placed = (*place)(size); placed.size() == size) into = placed;
  }
  if (into.empty()) {
    reply.value = AllocateValue(size);
    if (size > 0 && reply.value.empty()) return IoError("no memory for a Redis value");
    into = {const_cast<uint8_t*>(reply.value.data()), size};
  } else {
    reply.value = SharedBuffer(into.data(), into.size(), nullptr);
  }
  uint8_t crlf[2];
  if (Status s = ReadExact(into); !s.ok()) return s;
  if (Status s = ReadExact(crlf); !s.ok()) return s;
  if (crlf[0] != '\r' || crlf[1] != '\n') return ProtocolError("Redis: bulk not ended by CRLF");
  reply.kind = BulkReply::Kind::kValue;
  return reply;
}

Result<BulkReply> Reader::ReadStatus() {
  auto line = ReadLine();
  if (!line.ok()) return line.status();
  if (line->empty() || ((*line)[0] != '+' && (*line)[0] != '-'))
    return ProtocolError("Redis: a status reply was expected");
  BulkReply reply;
  reply.kind = (*line)[0] == '-' ? BulkReply::Kind::kError : BulkReply::Kind::kStatus;
  reply.line = line->substr(1);
  return reply;
}

}  // namespace pikv::storage::resp
