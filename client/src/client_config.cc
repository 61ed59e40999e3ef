#include "pikv/client/client_config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>

#include "pikv/device/model_config.h"
#include "pikv/proto/message.h"
#include "pikv/transport/controller_finder.h"
#include "pikv/transport/curve.h"

namespace pikv::client {

using K = Config::Kind;

// Each setting's default is ClientOptions' own (written there once), but for
// the endpoints: a program dials this host's defaults, the library none.
void DeclareClientSettings(Config& c) {
  const ClientOptions d;
  constexpr Config::Range kDeadline{.min = 1, .max = 3'600'000};
  constexpr Config::Range kUint32{.min = 0, .max = UINT32_MAX};
  c.Declare("local-node", K::kString, "tcp://127.0.0.1:7400", "This host's node");
  c.Declare("controller", K::kString, "tcp://127.0.0.1:7300",
            "The controller: an endpoint, a list of standbys, or etcd://h1:2379,...[/cluster] "
            "where the program reads etcd (empty: local-only plans)");
  c.Declare("host", K::kString, "", "This host's name, for locate's ranking");
  c.Declare("model-id", K::kString, "", "Model id of the key namespace");
  c.Declare("model-config", K::kString, "",
            "Path of the model's config.json: geometry, KV dtype and RoPE");
  c.Declare("model-config-json", K::kString, "",
            "The model's config.json as text, instead of model-config's path (what an engine "
            "computes with, handed over without a file)");
  c.DeclareInt("max-model-len", 0,
               "The engine's maximum model length (0: the config's); picks LongRoPE's factors",
               kUint32);
  c.Declare("dtype", K::kString, "",
            "KV dtype: f32, f16 or bf16 (empty: the model config's, else bf16)");
  c.DeclareInt("num-layers", d.num_layers, "Layers of the model", kUint32);
  c.DeclareInt("num-kv-heads", d.num_kv_heads, "KV heads per layer", kUint32);
  c.DeclareInt("head-dim", d.head_dim, "Head dimension", kUint32);
  c.Declare("attention-mode", K::kString, "isolated", "isolated or prefixed");
  c.Declare("distance-buckets", K::kString, d.distance_buckets.Name(),
            "Prefixed mode: how far after the system prompt a document is computed and stored, "
            "by its distance in the prompt: none (right after it), pow2 or a step in tokens");
  c.Declare("tenant", K::kString, "",
            "This engine's tenant (part of every key; empty: the default tenant); with security "
            "on, the one the keyring names for this engine's key");
  c.Declare("audit-rate", K::kString, "0",
            "Share of hits the engine recomputes and compares (0..1; a mismatch is reported to "
            "the controller, which drops the chunk everywhere)");
  c.DeclareDuration("node-timeout", d.node_timeout, "Deadline of calls to the local node",
                    kDeadline);
  c.DeclareDuration("controller-timeout", d.controller_timeout, "Deadline of locate", kDeadline);
  c.DeclareDuration("locate-budget", d.locate_budget,
                    "Longest a plan waits for locate; a later answer serves the next plans (1 s)",
                    {.min = 0, .max = 3'600'000});
  c.DeclareDuration("fetch-timeout", d.fetch_timeout, "Deadline of a whole fetch", kDeadline);
  c.DeclareBool("zero-copy", d.zero_copy,
                "Read and write the local node's CPU arena in place (when local-node is ipc://)");
  c.DeclareInt("store-threads", d.store_threads,
               "Threads gathering a chunk into the local node's arena on a store",
               {.min = 1, .max = 64});
  c.DeclareSize("stream-frame", d.stream_frame,
                "Objects over this size cross sockets in frames of it; 0 sends them whole",
                {.min = kMinStreamFrame, .max = kMaxStreamFrame, .or_zero = true});
  DeclareCurveSettings(c);
  c.Declare("local-node-id", K::kString, "",
            "The local node's id, for its key when security is on and local-node is tcp://");
}

namespace {

// The model as the settings give it: a model config (ReadModelFile) may
// override all but model-id and attention-mode.
Status ReadModelSettings(const Config& c, ClientOptions& o) {
  o.model_id = c.String("model-id");
  const std::string dtype = c.String("dtype");
  o.dtype = DType::kBF16;
  if (!dtype.empty()) {
    auto parsed = ParseDType(dtype);
    if (!parsed) return InvalidArgument("dtype: '" + dtype + "' is not f32, f16 or bf16");
    o.dtype = *parsed;
  }
  o.num_layers = static_cast<uint32_t>(c.Int("num-layers"));
  o.num_kv_heads = static_cast<uint32_t>(c.Int("num-kv-heads"));
  o.head_dim = static_cast<uint32_t>(c.Int("head-dim"));
  const std::string mode = c.String("attention-mode");
  if (mode != "isolated" && mode != "prefixed") {
    return InvalidArgument("attention-mode: '" + mode + "' is not isolated or prefixed");
  }
  o.mode = mode == "isolated" ? AttentionMode::kIsolated : AttentionMode::kPrefixed;
  auto buckets = DistanceBuckets::Parse(c.String("distance-buckets"));
  if (!buckets.ok()) return buckets.status();
  if (o.mode != AttentionMode::kPrefixed && *buckets != DistanceBuckets{}) {
    // A program's default scheme is prefixed mode's; an operator who chose
    // isolated gets none, one who set both is told.
    if (c.SourceOf("distance-buckets") != Config::Source::kDefault)
      return InvalidArgument(
          "distance-buckets: a distance from the system prompt needs "
          "attention-mode prefixed");
    *buckets = DistanceBuckets{};
  }
  o.distance_buckets = *buckets;
  return Status::Ok();
}

Status ReadAuditRate(const Config& c, ClientOptions& o) {
  const std::string rate = c.String("audit-rate");
  char* end = nullptr;
  o.audit_rate = std::strtod(rate.c_str(), &end);
  if (rate.empty() || *end != '\0' || !(o.audit_rate >= 0 && o.audit_rate <= 1))
    return InvalidArgument("audit-rate: '" + rate + "' is not a share between 0 and 1");
  return Status::Ok();
}

Status ReadTenant(const Config& c, ClientOptions& o) {
  o.tenant = c.String("tenant");
  if (!IsTenantName(o.tenant) || IsReservedName(o.tenant))
    return InvalidArgument("tenant: '" + o.tenant +
                           "' is not 1..63 of [A-Za-z0-9._-] other than 'default' and 'unknown'");
  return Status::Ok();
}

// Given sizes are checks on the config, never silent overrides of it.
Status TakeModel(const device::ModelSpec& model, const std::string& path, ClientOptions& o) {
  const device::KvGeometry& g = model.geometry;
  for (auto [key, given, derived] : {std::tuple{"num-layers", &o.num_layers, g.num_layers},
                                     {"num-kv-heads", &o.num_kv_heads, g.num_kv_heads},
                                     {"head-dim", &o.head_dim, g.head_dim}}) {
    if (*given != 0 && *given != derived) {
      return InvalidArgument(std::string(key) + ": " + std::to_string(*given) + " but " + path +
                             " says " + std::to_string(derived));
    }
    *given = derived;
  }
  o.kv_format = g.format;
  o.dtype = model.dtype;
  o.rope = model.rope;
  for (uint32_t l = 0; l < model.attention.size(); ++l)
    if (model.attention[l].span != device::AttentionSpan::kFull) o.windowed_layers.push_back(l);
  return Status::Ok();
}

// The model's config.json (a file or its text), read as the engines read
// it (when one is named). Named both ways, the later layer wins (an
// engine's own config, passed as flags, over a settings file's path);
// both in one layer is a mistake.
Status ReadModelFile(const Config& c, ClientOptions& o) {
  std::string path = c.String("model-config"), text = c.String("model-config-json");
  if (!path.empty() && !text.empty()) {
    const Config::Source path_from = c.SourceOf("model-config");
    const Config::Source text_from = c.SourceOf("model-config-json");
    if (path_from == text_from)
      return InvalidArgument("model-config and model-config-json: name the model's config once");
    (path_from > text_from ? text : path).clear();
  }
  if (path.empty() && text.empty()) return Status::Ok();
  std::string source = "model-config-json";
  if (!path.empty()) {
    std::ifstream f(path);
    if (!f) return InvalidArgument("model-config: cannot read " + path);
    std::stringstream file;
    file << f.rdbuf();
    text = file.str();
    source = "model-config " + path;
  }
  device::ModelConfigOptions read;
  read.max_model_len = static_cast<uint32_t>(c.Int("max-model-len"));  // ranged
  // Only a dtype the settings name beats the config's.
  if (!c.String("dtype").empty()) read.dtype = o.dtype;
  auto model = device::ReadModelConfig(text, read, source);  // its errors name the source
  if (!model.ok()) return InvalidArgument(model.status().message());
  return TakeModel(*model, source, o);
}

Status ReadTransport(const Config& c, ClientOptions& o) {
  o.local_node = c.String("local-node");
  o.controller = c.String("controller");
  o.host = c.String("host");
  o.node_timeout = c.Duration("node-timeout");
  o.controller_timeout = c.Duration("controller-timeout");
  o.locate_budget = c.Duration("locate-budget");
  o.fetch_timeout = c.Duration("fetch-timeout");
  o.zero_copy = c.Bool("zero-copy");
  o.store_threads = static_cast<int>(c.Int("store-threads"));  // ranged
  o.stream_frame = c.Size("stream-frame");                     // ranged
  return Status::Ok();
}

// After ReadTransport: which keys are needed depends on the endpoints.
Status ReadSecurity(const Config& c, ClientOptions& o) {
  auto security = CurveSecurityFrom(c);
  if (!security.ok()) return security.status();
  o.security = *security;
  o.local_node_id = c.String("local-node-id");
  return CheckClientSecurity(o);
}

}  // namespace

Result<ClientOptions> LoadClientOptions(const std::string& path, Config* config_out,
                                        const std::map<std::string, std::string>& overrides,
                                        FindControllersFn find_controllers,
                                        const std::map<std::string, std::string>& defaults) {
  Config c;
  DeclareClientSettings(c);
  for (const auto& [key, value] : defaults) {
    if (Status s = c.Set(key, value, Config::Source::kDefault); !s.ok()) return s;
  }
  if (!path.empty()) {
    if (Status s = c.LoadYamlFile(path); !s.ok()) return s;
  }
  if (Status s = c.LoadEnv(); !s.ok()) return s;
  for (const auto& [key, value] : overrides) {
    if (Status s = c.Set(key, value, Config::Source::kFlag); !s.ok()) return s;
  }
  ClientOptions o;
  // The first bad setting, in this order, is the one reported.
  for (auto step :
       {ReadModelSettings, ReadAuditRate, ReadTenant, ReadModelFile, ReadTransport, ReadSecurity}) {
    if (Status s = step(c, o); !s.ok()) return s;
  }
  o.find_controllers = find_controllers ? find_controllers : &ControllerFinder::Parse;
  // A spec this program cannot follow (etcd:// without coord) is refused
  // here, not found out as failed locates.
  if (o.find_controllers == &ControllerFinder::Parse && !o.controller.empty()) {
    if (auto listed = ControllerFinder::Parse(o.controller); !listed.ok())
      return InvalidArgument("controller: " + listed.status().message());
  }
  if (config_out) *config_out = c;
  return o;
}

}  // namespace pikv::client
