#include "pikv/proto/shared_buffer.h"

#include <cstring>

namespace pikv {

SharedBuffer SharedBuffer::FromVector(std::vector<uint8_t> bytes) {
  auto owner = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return {owner->data(), owner->size(), owner};
}

SharedBuffer SharedBuffer::Copy(std::span<const uint8_t> bytes) {
  return FromVector(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

}  // namespace pikv
