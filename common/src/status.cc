#include "pikv/common/status.h"

namespace pikv {

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(ErrorCodeName(code_));
  if (!message_.empty()) s += ": " + message_;
  return s;
}

}  // namespace pikv
