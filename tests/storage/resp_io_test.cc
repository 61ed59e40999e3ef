// The remote tier's own RESP I/O against hostile bytes: a socketpair stands
// in for Redis where a real server could not send what is tested (a
// malformed length, a reply cut short); remote_tier_test runs it against a
// real redis-server.
#include "../../storage/src/resp_io.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace pikv::storage::resp {
namespace {

class RespIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    timeval t{0, 200'000};  // a silent peer is a timeout, not a hang
    setsockopt(fds_[0], SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  }
  void TearDown() override {
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }
  void Send(const std::string& bytes) {
    ASSERT_EQ(write(fds_[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  void ClosePeer() {
    close(fds_[1]);
    fds_[1] = -1;
  }
  int fds_[2] = {-1, -1};
};

std::string Text(const SharedBuffer& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

TEST_F(RespIoTest, ACommandIsWrittenAsOneRespArrayWithItsValueFromItsOwnMemory) {
  const std::string big(10000, 'x');
  const std::string_view args[] = {"SET", "k", big, "EX", "5"};
  std::string got;
  std::thread reader([&] {
    char buf[4096];
    const size_t want = 44 + big.size();
    while (got.size() < want) {
      const ssize_t n = read(fds_[1], buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  });
  ASSERT_TRUE(WriteCommand(fds_[0], args).ok());
  reader.join();
  EXPECT_EQ(got, "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$10000\r\n" + big + "\r\n$2\r\nEX\r\n$1\r\n5\r\n");
}

TEST_F(RespIoTest, PipelinedRepliesOfEveryKindAreReadInOrder) {
  Send("$5\r\nhello\r\n$-1\r\n-ERR no\r\n+OK\r\n$0\r\n\r\n");
  Reader r(fds_[0]);
  auto a = r.ReadBulk(100);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, BulkReply::Kind::kValue);
  EXPECT_EQ(Text(a->value), "hello");
  EXPECT_EQ(r.ReadBulk(100)->kind, BulkReply::Kind::kNil);
  auto e = r.ReadBulk(100);
  EXPECT_EQ(e->kind, BulkReply::Kind::kError);
  EXPECT_EQ(e->line, "ERR no");
  EXPECT_EQ(r.ReadStatus()->kind, BulkReply::Kind::kStatus);
  auto empty = r.ReadBulk(100);
  EXPECT_EQ(empty->kind, BulkReply::Kind::kValue);
  EXPECT_EQ(empty->value.size(), 0u);
  EXPECT_TRUE(r.empty());
}

TEST_F(RespIoTest, AValueLandsInTheCallersMemoryOnlyAtTheRightSize) {
  Send("$4\r\nabcd\r\n$3\r\nxyz\r\n$4\r\nwxyz\r\n");
  Reader r(fds_[0]);
  char place[4] = {};
  std::span<uint8_t> into(reinterpret_cast<uint8_t*>(place), 4);
  EXPECT_EQ(r.ReadBulk(100, into)->kind, BulkReply::Kind::kValue);
  EXPECT_EQ(std::string(place, 4), "abcd");
  // A short value is dropped (the connection stays in step) and not written.
  EXPECT_EQ(r.ReadBulk(100, into)->kind, BulkReply::Kind::kWrongSize);
  EXPECT_EQ(std::string(place, 4), "abcd");
  EXPECT_EQ(r.ReadBulk(100, into)->kind, BulkReply::Kind::kValue);
  EXPECT_EQ(std::string(place, 4), "wxyz");
}

TEST_F(RespIoTest, AValueOverTheLimitIsDroppedAndTheNextReplyStillReads) {
  const std::string big(3 << 20, 'b');  // past the reader's buffer
  std::thread sender(
      [&] { Send("$" + std::to_string(big.size()) + "\r\n" + big + "\r\n+OK\r\n"); });
  Reader r(fds_[0]);
  EXPECT_EQ(r.ReadBulk(1 << 20)->kind, BulkReply::Kind::kTooLarge);
  EXPECT_EQ(r.ReadStatus()->kind, BulkReply::Kind::kStatus);
  sender.join();
}

TEST_F(RespIoTest, MalformedRepliesAreErrorsNeverValues) {
  for (const std::string bad :
       {"$abc\r\n", "$-5\r\n", "$\r\n", "$+3\r\nabc\r\n", "$99999999999999999999999\r\n", "*1\r\n",
        ":1\r\n", "\r\n", "$3\nabc\r\n", "$3\r\nabcXY"}) {
    SCOPED_TRACE(bad);
    TearDown();
    SetUp();
    Send(bad);
    Reader r(fds_[0]);
    auto got = r.ReadBulk(100);
    EXPECT_FALSE(got.ok() && got->kind == BulkReply::Kind::kValue);
    EXPECT_FALSE(got.ok() && got->kind == BulkReply::Kind::kNil);
  }
}

// A length no value can have is not read through (its +2 would wrap, and a
// reader that skipped that many bytes would lose step): the connection goes.
TEST_F(RespIoTest, ABulkLengthPastAnyValueIsAProtocolError) {
  for (const std::string bad : {"$18446744073709551615\r\n+OK\r\n", "$1099511627777\r\n+OK\r\n"}) {
    SCOPED_TRACE(bad);
    TearDown();
    SetUp();
    Send(bad);
    EXPECT_EQ(Reader(fds_[0]).ReadBulk(1 << 20).code(), ErrorCode::kProtocol);
  }
}

TEST_F(RespIoTest, AReplyCutShortOrNeverEndingIsAnErrorNotAHang) {
  Send("$10\r\nabc");
  ClosePeer();
  EXPECT_EQ(Reader(fds_[0]).ReadBulk(100).code(), ErrorCode::kIoError);
  TearDown();
  SetUp();
  Send("$10\r\nabc");  // and then silence: the socket's timeout ends it
  EXPECT_EQ(Reader(fds_[0]).ReadBulk(100).code(), ErrorCode::kTimeout);
  TearDown();
  SetUp();
  Send("+" + std::string(8192, 'a'));  // a line with no end
  EXPECT_EQ(Reader(fds_[0]).ReadStatus().code(), ErrorCode::kProtocol);
}

}  // namespace
}  // namespace pikv::storage::resp
