#include "pikv/client/client_config.h"

#include <fstream>
#include <sstream>

namespace pikv::client {

Result<ClientOptions> LoadClientOptions(const std::string& path, Config* config_out) {
  using K = Config::Kind;
  Config c;
  c.Declare("local-node", K::kString, "tcp://127.0.0.1:7400", "This host's node");
  c.Declare("controller", K::kString, "tcp://127.0.0.1:7300",
            "The controller (empty: local-only plans)");
  c.Declare("host", K::kString, "", "This host's name, for locate's ranking");
  c.Declare("model-id", K::kString, "", "Model id of the key namespace");
  c.Declare("dtype", K::kString, "bf16", "KV dtype: f32, f16 or bf16");
  c.Declare("num-layers", K::kInt, "0", "Layers of the model");
  c.Declare("num-kv-heads", K::kInt, "0", "KV heads per layer");
  c.Declare("head-dim", K::kInt, "0", "Head dimension");
  c.Declare("rope-config", K::kString, "",
            "Path of the model's config.json (rope_theta, rope_scaling, ...)");
  c.Declare("rope-style", K::kString, "neox", "neox or gptj");
  c.Declare("attention-mode", K::kString, "isolated", "isolated or sys-prefixed");
  c.Declare("node-timeout", K::kDuration, "500ms", "Deadline of calls to the local node");
  c.Declare("controller-timeout", K::kDuration, "200ms", "Deadline of locate");
  c.Declare("fetch-timeout", K::kDuration, "2s", "Deadline of a whole fetch");
  if (!path.empty()) {
    if (Status s = c.LoadYamlFile(path); !s.ok()) return s;
  }
  if (Status s = c.LoadEnv(); !s.ok()) return s;

  ClientOptions o;
  o.local_node = c.String("local-node");
  o.controller = c.String("controller");
  o.host = c.String("host");
  o.model_id = c.String("model-id");
  auto dtype = ParseDType(c.String("dtype"));
  if (!dtype) return InvalidArgument("dtype: '" + c.String("dtype") + "' is not f32, f16 or bf16");
  o.dtype = *dtype;
  o.num_layers = static_cast<uint32_t>(c.Int("num-layers"));
  o.num_kv_heads = static_cast<uint32_t>(c.Int("num-kv-heads"));
  o.head_dim = static_cast<uint32_t>(c.Int("head-dim"));
  const std::string style = c.String("rope-style");
  if (style != "neox" && style != "gptj")
    return InvalidArgument("rope-style: '" + style + "' is not neox or gptj");
  const std::string mode = c.String("attention-mode");
  if (mode != "isolated" && mode != "sys-prefixed") {
    return InvalidArgument("attention-mode: '" + mode + "' is not isolated or sys-prefixed");
  }
  o.mode = mode == "isolated" ? AttentionMode::kIsolated : AttentionMode::kSysPrefixed;
  if (!c.String("rope-config").empty()) {
    std::ifstream f(c.String("rope-config"));
    if (!f) return InvalidArgument("rope-config: cannot read " + c.String("rope-config"));
    std::stringstream text;
    text << f.rdbuf();
    auto rope = device::RopeSpec::FromConfigJson(
        text.str(), style == "neox" ? RopeStyle::kNeox : RopeStyle::kGptj);
    if (!rope.ok()) return InvalidArgument("rope-config: " + rope.status().message());
    o.rope = *rope;
    if (o.head_dim == 0) o.head_dim = o.rope.head_dim;
  }
  o.node_timeout = c.Duration("node-timeout");
  o.controller_timeout = c.Duration("controller-timeout");
  o.fetch_timeout = c.Duration("fetch-timeout");
  if (config_out) *config_out = c;
  return o;
}

}  // namespace pikv::client
