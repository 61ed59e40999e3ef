#include "pikv/proto/kv_types.h"

#include "pikv/common/enum_names.h"

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

namespace {
constexpr EnumName<DType> kDTypeNames[] = {{DType::kF32, "f32"},     {DType::kF16, "f16"},
                                           {DType::kBF16, "bf16"},   {DType::kF32, "float32"},
                                           {DType::kF16, "float16"}, {DType::kBF16, "bfloat16"}};
}  // namespace

std::string_view DTypeName(DType d) { return NameOf(kDTypeNames, d); }

std::optional<DType> ParseDType(std::string_view name) { return ValueOf(kDTypeNames, name); }

std::string_view KvFormatName(KvFormat f) { return f == KvFormat::kMla ? "mla" : "standard"; }

std::string_view AttentionModeName(AttentionMode m) {
  return m == AttentionMode::kPrefixed ? "prefixed" : "isolated";
}

}  // namespace pikv
