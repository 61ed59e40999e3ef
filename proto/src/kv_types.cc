#include "pikv/proto/kv_types.h"

namespace pikv {

size_t DTypeSize(DType d) {
  switch (d) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
  }
  return 0;
}

std::string_view DTypeName(DType d) {
  switch (d) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "f16" || name == "float16") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  return std::nullopt;
}

std::string_view KvFormatName(KvFormat f) { return f == KvFormat::kMla ? "mla" : "standard"; }

std::string_view AttentionModeName(AttentionMode m) {
  return m == AttentionMode::kSysPrefixed ? "sys-prefixed" : "isolated";
}

}  // namespace pikv
