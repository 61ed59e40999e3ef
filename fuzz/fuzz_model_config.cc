// A model's config.json, as the client reads its RoPE spec.
#include "pikv/device/rope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  for (auto style : {pikv::RopeStyle::kNeox, pikv::RopeStyle::kGptj}) {
    auto spec = pikv::device::RopeSpec::FromConfigJson(json, style);
    if (spec.ok()) (void)spec->Signature();
  }
  return 0;
}
