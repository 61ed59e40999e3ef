// `pikv model-info config.json`: what pikv derives from a model's config.
#pragma once

#include <cstdint>
#include <string>

namespace pikv::cli {

struct ModelInfoOptions {
  std::string path;
  uint32_t max_model_len = 0;
  std::string dtype;  // empty: the config's torch_dtype
  bool json = false;
};

// Prints the derivation (a table, or JSON); returns 0, or 1 with the reason
// on stderr when the config is refused or unreadable, 2 on a bad --dtype.
int RunModelInfo(const ModelInfoOptions& options);

}  // namespace pikv::cli
