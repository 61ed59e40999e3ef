// Client settings from a YAML file and PIKV_* environment variables (the
// engine owns its command line), with the same rules as the daemons: the
// environment beats the file, the file beats the defaults; unknown keys and
// bad values fail with the key's name. Keys:
//   local-node, controller, host, model-id, model-config (the model's
//   config.json: geometry, KV dtype and RoPE, read as the engines read it,
//   device::ReadModelConfig), max-model-len (the engine's; picks LongRoPE's
//   factors), dtype (f32 | f16 | bf16; overrides the config's), num-layers,
//   num-kv-heads, head-dim (without a model config; with one they must agree
//   with it), attention-mode (isolated | prefixed), node-timeout,
//   controller-timeout, fetch-timeout, curve-key and curve-keyring (security
//   on: transport/curve.h), local-node-id (a tcp local node's key).
#pragma once

#include <map>
#include <string>

#include "pikv/client/client.h"
#include "pikv/common/config.h"

namespace pikv::client {

// `path` may be empty (environment and defaults only). `overrides` (key ->
// value, as flags would give them) beat the environment: an engine's own
// settings, e.g. from vLLM's kv_connector_extra_config. `config_out`, when
// given, receives the effective settings (for printing). `find_controllers`
// becomes ClientOptions::find_controllers: a program that links coord passes
// coord::FindControllers to take etcd:// specs; with the default, such a
// spec is refused here. `defaults` replace the declared defaults (lowest
// layer, under the file): a program's own, e.g. the vLLM connector's reuse
// mode.
Result<ClientOptions> LoadClientOptions(
    const std::string& path, Config* config_out = nullptr,
    const std::map<std::string, std::string>& overrides = {},
    FindControllersFn find_controllers = &ControllerFinder::Parse,
    const std::map<std::string, std::string>& defaults = {});

}  // namespace pikv::client
