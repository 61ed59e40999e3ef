// pikv: the operator's CLI. `pikv admin <op>` asks the controller and prints
// a table, or the controller's JSON with --json. Exits 1 with a message when
// the controller does not answer within --timeout, 2 on bad usage.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_tables.h"
#include "demo.h"
#include "key_commands.h"
#include "model_info.h"
#include "pikv/common/text_table.h"
#include "pikv/common/units.h"
#include "pikv/common/version.h"
#include "pikv/proto/curve.h"
#include "pikv/rpc/admin_client.h"

namespace {

using nlohmann::json;
using pikv::cli::PrintLeadership;
using pikv::cli::PrintLocate;
using pikv::cli::PrintNodes;
using pikv::cli::PrintStats;

int Fail(const std::string& message) {
  std::cerr << "pikv: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pikv: operate a pikv cluster"};
  app.set_version_flag("--version", pikv::VersionLine("pikv"));
  app.require_subcommand(1);
  const char* env_controller = std::getenv("PIKV_CONTROLLER");
  std::string controller = env_controller ? env_controller : "tcp://127.0.0.1:7300";
  std::string timeout = "2s";
  bool as_json = false;
  pikv::cli::DemoOptions demo_options;
  CLI::App* demo =
      app.add_subcommand("demo", "Run a local cluster and a RAG workload through it, then report");
  CLI::App* cluster =
      app.add_subcommand("cluster", "Run a local cluster in the foreground until Ctrl-C");
  for (CLI::App* sub : {demo, cluster}) {
    sub->add_option("--nodes", demo_options.cluster.nodes, "Nodes to start (1-64)")
        ->capture_default_str();
    sub->add_option("--controllers", demo_options.cluster.controllers,
                    "Controllers (1-5); more than 1: standbys elected on a local etcd cluster")
        ->capture_default_str();
    sub->add_option("--redis", demo_options.cluster.redis, "auto, off, or host:port")
        ->capture_default_str();
    sub->add_option("--cpu-capacity", demo_options.cluster.cpu_capacity, "Each node's CPU tier")
        ->capture_default_str();
    sub->add_option("--bin-dir", demo_options.cluster.bin_dir,
                    "Where pikv-node and pikv-controller are (default: next to pikv, then PATH)");
    sub->add_flag(
        "--insecure", [&demo_options](int64_t) { demo_options.cluster.secure = false; },
        "No CURVE (a laptop demo): anyone who reaches the ports may read, write and clear");
  }
  demo->add_option("--prompts", demo_options.prompts, "Prompts in the workload")
      ->capture_default_str();
  demo->add_option("--docs", demo_options.docs, "Distinct documents")->capture_default_str();
  demo->add_option("--check-every", demo_options.check_every,
                   "Check every Nth answer against recomputing")
      ->capture_default_str();
  pikv::cli::ModelInfoOptions model_info_options;
  CLI::App* model_info = app.add_subcommand(
      "model-info", "What pikv derives from a model's config.json (RoPE, geometry, KV size)");
  model_info->add_option("config", model_info_options.path, "The model's config.json")->required();
  model_info->add_option("--max-model-len", model_info_options.max_model_len,
                         "The engine's maximum model length (picks LongRoPE's factors)");
  model_info->add_option("--dtype", model_info_options.dtype,
                         "KV dtype (f32, f16, bf16) instead of the config's torch_dtype");
  model_info->add_flag("--json", model_info_options.json, "Print JSON");
  pikv::cli::KeyCommands key_commands(app);
  const char* env_key = std::getenv("PIKV_CURVE_KEY");
  const char* env_keyring = std::getenv("PIKV_CURVE_KEYRING");
  std::string curve_key = env_key ? env_key : "", curve_keyring = env_keyring ? env_keyring : "";
  CLI::App* admin =
      app.add_subcommand("admin", "Query and administer the cluster through its controller");
  admin->require_subcommand(1);
  admin
      ->add_option("--controller", controller,
                   "Controller: an endpoint, a list, or etcd://h1:2379,...[/cluster] (env "
                   "PIKV_CONTROLLER)")
      ->capture_default_str();
  admin->add_option("--timeout", timeout, "How long to wait for the controller")
      ->capture_default_str();
  admin->add_flag("--json", as_json, "Print the controller's JSON instead of a table");
  admin->add_option("--curve-key", curve_key,
                    "Key pair PREFIX for a secure cluster (env PIKV_CURVE_KEY); changes need the "
                    "admin key");
  admin->add_option("--curve-keyring", curve_keyring,
                    "The cluster's keyring (env PIKV_CURVE_KEYRING)");

  std::vector<std::string> hex_keys;
  std::string node, tokens, model, dtype = "bf16", rope, mode = "isolated", host;
  auto* nodes = admin->add_subcommand("nodes", "Nodes, their state and tier usage");
  auto* stats = admin->add_subcommand(
      "stats", "Cluster-wide hits, misses, bytes and chunks per tier; event rates");
  auto* health = admin->add_subcommand("health", "Is the cluster healthy");
  auto* locate = admin->add_subcommand("locate", "Where chunks are, by key or by token ids");
  locate->add_option("keys", hex_keys, "Chunk keys (32 hex digits)");
  locate->add_option("--tokens", tokens, "Token ids, comma-separated (with --model ...)");
  locate->add_option("--model", model, "Model id of the key namespace");
  locate->add_option("--dtype", dtype, "KV dtype of the key namespace")->capture_default_str();
  locate->add_option("--rope", rope, "RoPE signature of the key namespace");
  locate->add_option("--mode", mode, "isolated or sys-prefixed")->capture_default_str();
  locate->add_option("--host", host, "Rank replicas for a client on this host");
  auto* clear = admin->add_subcommand(
      "clear", "Drop every chunk from one node's CPU and disk tiers, or all nodes'");
  clear->add_option("--node", node, "Only this node");
  auto* pin = admin->add_subcommand("pin", "Pin chunks on every node holding them");
  auto* unpin = admin->add_subcommand("unpin", "Unpin chunks on every node");
  auto* evict = admin->add_subcommand("evict", "Delete chunks from every node and the shared tier");
  for (auto* sub : {pin, unpin, evict})
    sub->add_option("keys", hex_keys, "Chunk keys (32 hex digits)")->required();
  std::string engine;
  auto* revoke = admin->add_subcommand(
      "revoke",
      "Drop every object an engine wrote, on every node and in Redis, and refuse its key");
  revoke->add_option("engine", engine, "The engine's name in the keyring")->required();
  // --controller, --timeout and --json may follow the operation too.
  for (auto* sub : {nodes, stats, health, locate, clear, pin, unpin, evict, revoke})
    sub->fallthrough();
  CLI11_PARSE(app, argc, argv);
  if (demo->parsed()) return pikv::cli::RunDemo(demo_options);
  if (cluster->parsed()) return pikv::cli::RunCluster(demo_options);
  if (model_info->parsed()) return pikv::cli::RunModelInfo(model_info_options);
  if (auto status = key_commands.Run()) return *status;

  auto wait = pikv::ParseDuration(timeout);
  if (!wait.ok()) {
    std::cerr << "pikv: --timeout: " << wait.status().message() << "\n";
    return 2;
  }
  std::vector<pikv::ChunkKey> keys;
  for (const auto& h : hex_keys) {
    auto k = pikv::ChunkKey::FromHex(h);
    if (!k) {
      std::cerr << "pikv: '" << h << "' is not a chunk key (32 hex digits)\n";
      return 2;
    }
    keys.push_back(*k);
  }
  if (locate->parsed() && !tokens.empty()) {
    auto d = pikv::ParseDType(dtype);
    if (model.empty() || !d || (mode != "isolated" && mode != "sys-prefixed")) {
      std::cerr << "pikv: locate --tokens needs --model, a valid --dtype and --mode\n";
      return 2;
    }
    std::vector<int32_t> ids;
    std::stringstream ss(tokens);
    for (std::string t; std::getline(ss, t, ',');) {
      try {
        ids.push_back(std::stoi(t));
      } catch (const std::exception&) {
        std::cerr << "pikv: '" << t << "' is not a token id\n";
        return 2;
      }
    }
    pikv::KeyNamespace ns{
        model,
        pikv::KvFormat::kStandard,
        *d,
        rope,
        mode == "isolated" ? pikv::AttentionMode::kIsolated : pikv::AttentionMode::kSysPrefixed,
        {}};
    keys.push_back(pikv::MakeChunkKey(ns, ids));
  }
  if (locate->parsed() && keys.empty()) {
    std::cerr << "pikv: locate needs keys or --tokens\n";
    return 2;
  }

  pikv::MsgType type = nodes->parsed()    ? pikv::MsgType::kAdminNodes
                       : stats->parsed()  ? pikv::MsgType::kAdminStats
                       : health->parsed() ? pikv::MsgType::kAdminHealth
                       : locate->parsed() ? pikv::MsgType::kLocate
                       : clear->parsed()  ? pikv::MsgType::kAdminClear
                       : pin->parsed()    ? pikv::MsgType::kAdminPin
                       : unpin->parsed()  ? pikv::MsgType::kAdminUnpin
                       : revoke->parsed() ? pikv::MsgType::kAdminRevoke
                                          : pikv::MsgType::kAdminEvict;
  pikv::Fields fields;
  if (!engine.empty()) fields["engine"] = engine;
  if (!node.empty()) fields["node_id"] = node;
  if (!host.empty()) fields["host"] = host;
  auto security = pikv::CurveSecurity::Load(curve_key, curve_keyring);
  if (!security.ok()) return Fail(security.status().ToString());
  std::optional<pikv::CurveClientKeys> curve;
  if (*security) {
    auto keys = (*security)->ForController();
    if (!keys.ok()) return Fail(keys.status().ToString());
    curve = std::move(*keys);
  }
  pikv::rpc::AdminClient client(controller, *wait, curve);
  auto reply = client.Json(type, keys, fields);
  if (!reply.ok()) {
    if (reply.code() == pikv::ErrorCode::kTimeout ||
        reply.code() == pikv::ErrorCode::kUnavailable) {
      return Fail("controller " + controller + " did not answer within " + timeout);
    }
    return Fail(reply.status().ToString());
  }
  if (as_json) {
    std::cout << *reply << "\n";
    return 0;
  }
  json j = json::parse(*reply, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Fail("controller sent unreadable JSON");
  try {
    if (nodes->parsed()) {
      PrintNodes(j);
      if (auto health = client.Json(pikv::MsgType::kAdminHealth); health.ok())
        PrintLeadership(json::parse(*health, nullptr, /*allow_exceptions=*/false));
    } else if (stats->parsed()) {
      PrintStats(j);
    } else if (health->parsed()) {
      return pikv::cli::PrintHealth(j);
    } else if (locate->parsed()) {
      PrintLocate(j);
    } else {
      pikv::cli::PrintForwarded(j);
    }
  } catch (const json::exception& e) {
    return Fail(std::string("controller sent an unexpected document: ") + e.what());
  }
  return 0;
}
