// A YAML config file, as pikv-node reads one, against keys of every kind.
#include "pikv/common/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using K = pikv::Config::Kind;
  pikv::Config c;
  c.Declare("endpoint", K::kList, "", "");
  c.Declare("node-id", K::kString, "", "");
  c.Declare("cpu-capacity", K::kSize, "1GiB", "");
  c.Declare("heartbeat-interval", K::kDuration, "1s", "");
  c.Declare("workers", K::kInt, "2", "");
  c.Declare("disk", K::kBool, "true", "");
  if (c.LoadYamlText(std::string(reinterpret_cast<const char*>(data), size), "fuzz").ok()) {
    (void)c.Print();
  }
  return 0;
}
