// Status and Result<T>: the one error type of pikv's data path.
//
// Codes are part of the wire protocol (replies carry them per key), so they
// are numbered explicitly and never renumbered; new codes take new numbers.
// Outcomes a caller acts on differently are different codes: a miss
// (kNotFound) is not a failure, kRejected means "dropped by policy or a full
// queue", kUnavailable means "a dependency is down, degrade".
// Text lives only at the edges: ToString() for logs, CLI and error replies.
// Thread-safety: plain values, safe to copy across threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pikv/common/enum_names.h"

namespace pikv {

enum class ErrorCode : int32_t {
  kOk = 0,
  // 1-99: outcomes of a single operation.
  kNotFound = 1,           // a miss; not an error for callers of get/exists
  kRejected = 2,           // refused by policy: capacity, pinned, queue full
  kRetry = 3,              // transiently busy, try again
  kTimeout = 4,            // deadline passed
  kUnavailable = 5,        // dependency down (circuit open, peer dead)
  kIoError = 6,            // disk or socket failure
  kCorruption = 7,         // checksum or size mismatch in stored data
  kInvalidArgument = 8,    // caller's input is malformed
  kTooLarge = 9,           // over a configured size or count limit
  kUnsupported = 10,       // unknown message type, version, format
  kInternal = 11,          // a bug: should never be seen
  kPermissionDenied = 12,  // the authenticated sender's role may not do this
  kNotLeader = 13,         // a standby controller: the reply names the leader (proto/message.h)
  // 100-199: protocol errors.
  kProtocol = 100,  // malformed frame or header
};

inline constexpr EnumName<ErrorCode> kErrorCodeNames[] = {
    {ErrorCode::kOk, "ok"},
    {ErrorCode::kNotFound, "not_found"},
    {ErrorCode::kRejected, "rejected"},
    {ErrorCode::kRetry, "retry"},
    {ErrorCode::kTimeout, "timeout"},
    {ErrorCode::kUnavailable, "unavailable"},
    {ErrorCode::kIoError, "io_error"},
    {ErrorCode::kCorruption, "corruption"},
    {ErrorCode::kInvalidArgument, "invalid_argument"},
    {ErrorCode::kTooLarge, "too_large"},
    {ErrorCode::kUnsupported, "unsupported"},
    {ErrorCode::kInternal, "internal"},
    {ErrorCode::kPermissionDenied, "permission_denied"},
    {ErrorCode::kNotLeader, "not_leader"},
    {ErrorCode::kProtocol, "protocol"},
};
inline std::string_view ErrorCodeName(ErrorCode code) {
  return NameOf(kErrorCodeNames, code, "unknown");
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Marks a deliberate ignore so it is greppable.
  void IgnoreError() const {}

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status NotFound(std::string m = {}) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status Rejected(std::string m) { return {ErrorCode::kRejected, std::move(m)}; }
inline Status Timeout(std::string m) { return {ErrorCode::kTimeout, std::move(m)}; }
inline Status Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Status IoError(std::string m) { return {ErrorCode::kIoError, std::move(m)}; }
inline Status Corruption(std::string m) { return {ErrorCode::kCorruption, std::move(m)}; }
inline Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status TooLarge(std::string m) { return {ErrorCode::kTooLarge, std::move(m)}; }
inline Status Unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {ErrorCode::kPermissionDenied, std::move(m)};
}
inline Status ProtocolError(std::string m) { return {ErrorCode::kProtocol, std::move(m)}; }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  ErrorCode code() const { return status_.code(); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace pikv
