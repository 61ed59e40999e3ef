// A model's config.json, as the client reads its RoPE spec and as
// `pikv model-info` reads the whole model (per-layer plans included).
#include "pikv/device/model_config.h"
#include "pikv/device/rope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  for (auto style : {pikv::RopeStyle::kNeox, pikv::RopeStyle::kGptj}) {
    auto spec = pikv::device::RopeSpec::FromConfigJson(json, style);
    if (spec.ok()) (void)spec->Signature();
  }
  pikv::device::ModelConfigOptions options;
  options.max_model_len = 4096;
  auto model = pikv::device::ReadModelConfig(json, options);
  if (model.ok()) {
    (void)model->rope.Signature();
    for (const auto& spec : model->rope.specs()) (void)spec.InverseFrequencies();
    (void)pikv::device::DescribeModelJson(*model);
    (void)model->KvBytesPerToken();
  }
  return 0;
}
