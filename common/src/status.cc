#include "pikv/common/status.h"

namespace pikv {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kRejected:
      return "rejected";
    case ErrorCode::kRetry:
      return "retry";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kIoError:
      return "io_error";
    case ErrorCode::kCorruption:
      return "corruption";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kTooLarge:
      return "too_large";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kNotLeader:
      return "not_leader";
    case ErrorCode::kProtocol:
      return "protocol";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(ErrorCodeName(code_));
  if (!message_.empty()) s += ": " + message_;
  return s;
}

}  // namespace pikv
