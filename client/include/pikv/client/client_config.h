// Client settings from a YAML file and PIKV_* environment variables (the
// engine owns its command line), with the same rules as the daemons: the
// environment beats the file, the file beats the defaults; unknown keys and
// bad values fail with the key's name. The keys, each with its default and
// help line, are DeclareClientSettings'; deploy/client.example.yaml names
// every one (a test checks).
#pragma once

#include <map>
#include <string>

#include "pikv/client/client.h"
#include "pikv/common/config.h"

namespace pikv::client {

// Declares every client setting in `c`.
void DeclareClientSettings(Config& c);

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
