// pikv: the operator's CLI. `pikv admin <op>` asks the controller and prints
// a table, or the controller's JSON with --json. Exits 1 with a message when
// the controller does not answer within --timeout, 2 on bad usage.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli_tables.h"
#include "demo.h"
#include "key_commands.h"
#include "model_info.h"
#include "pikv/common/units.h"
#include "pikv/common/version.h"
#include "pikv/coord/find_controllers.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/transport/curve.h"

namespace {

using nlohmann::json;
using pikv::MsgType;
using pikv::rpc::AdminClient;

int Fail(const std::string& message) {
  std::cerr << "pikv: " << message << "\n";
  return 1;
}

std::string Env(const char* name, const char* otherwise = "") {
  const char* value = std::getenv(name);
  return value ? value : otherwise;
}

// `demo` and `cluster` start the same local cluster; `demo` then runs a workload.
std::pair<CLI::App*, CLI::App*> AddDemo(CLI::App& app, pikv::cli::DemoOptions& o) {
  CLI::App* demo =
      app.add_subcommand("demo", "Run a local cluster and a RAG workload through it, then report");
  CLI::App* cluster =
      app.add_subcommand("cluster", "Run a local cluster in the foreground until Ctrl-C");
  for (CLI::App* sub : {demo, cluster}) {
    sub->add_option("--nodes", o.cluster.nodes, "Nodes to start (1-64)")->capture_default_str();
    sub->add_option("--controllers", o.cluster.controllers,
                    "Controllers (1-5); more than 1: standbys elected on a local etcd cluster")
        ->capture_default_str();
    sub->add_option("--redis", o.cluster.redis, "auto, off, or host:port")->capture_default_str();
    sub->add_option("--cpu-capacity", o.cluster.cpu_capacity, "Each node's CPU tier")
        ->capture_default_str();
    sub->add_option("--bin-dir", o.cluster.bin_dir,
                    "Where pikv-node and pikv-controller are (default: next to pikv, then PATH)");
    sub->add_flag(
        "--insecure", [&o](int64_t) { o.cluster.secure = false; },
        "No CURVE (a laptop demo): anyone who reaches the ports may read, write and clear");
  }
  cluster->add_flag("--json", o.json,
                    "Print the cluster's processes (pid, endpoints, data dir) as one JSON line");
  demo->add_option("--prompts", o.prompts, "Prompts in the workload")->capture_default_str();
  demo->add_option("--docs", o.docs, "Distinct documents")->capture_default_str();
  demo->add_option("--check-every", o.check_every, "Check every Nth answer against recomputing")
      ->capture_default_str();
  return {demo, cluster};
}

CLI::App* AddModelInfo(CLI::App& app, pikv::cli::ModelInfoOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "model-info", "What pikv derives from a model's config.json (RoPE, geometry, KV size)");
  sub->add_option("config", o.path, "The model's config.json")->required();
  sub->add_option("--max-model-len", o.max_model_len,
                  "The engine's maximum model length (picks LongRoPE's factors)");
  sub->add_option("--dtype", o.dtype,
                  "KV dtype (f32, f16, bf16) instead of the config's torch_dtype");
  sub->add_flag("--json", o.json, "Print JSON");
  return sub;
}

// `pikv route ARGS...`: the router is Python (pikv.router, beside the
// connector it keys prompts like); this runs it with every argument as
// given, --help included, on $PIKV_PYTHON (default python3).
CLI::App* AddRoute(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "route", "An OpenAI-compatible router in front of vLLM servers, by chunk set (its --help)");
  sub->prefix_command();
  sub->set_help_flag();
  return sub;
}

int RunRoute(const CLI::App& route) {
  const std::string python = Env("PIKV_PYTHON", "python3");
  std::vector<std::string> args = {python, "-m", "pikv.router"};
  for (const std::string& a : route.remaining()) args.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp(python.c_str(), argv.data());
  return Fail("cannot run " + python + " -m pikv.router: " + std::strerror(errno) +
              " (set PIKV_PYTHON to a Python with pikv installed)");
}

// What `pikv admin` parses into: the options every operation shares, then
// those of one operation or another.
struct AdminOptions {
  std::string controller = Env("PIKV_CONTROLLER", "tcp://127.0.0.1:7300"), timeout = "2s";
  std::string curve_key = Env("PIKV_CURVE_KEY"), curve_keyring = Env("PIKV_CURVE_KEYRING");
  bool json = false;
  std::vector<std::string> hex_keys;
  std::string node, tokens, model, dtype = "bf16", rope, mode = "isolated", host, engine;
  std::vector<int64_t> chunk_tokens;    // score
  std::vector<std::string> candidates;  // score
};

// An admin operation: its request, and how it prints the controller's reply
// (returning the exit code).
struct AdminOp {
  const char* name;
  const char* help;
  MsgType type;
  int (*print)(const json& reply, AdminClient& client);
};

template <void (*Print)(const json&)>
int Show(const json& j, AdminClient&) {
  Print(j);
  return 0;
}

int ShowHealth(const json& j, AdminClient&) { return pikv::cli::PrintHealth(j); }

// The nodes, then who leads: that is in the health document, a second call.
int ShowNodes(const json& j, AdminClient& client) {
  pikv::cli::PrintNodes(j);
  if (auto health = client.Json(MsgType::kAdminHealth); health.ok())
    pikv::cli::PrintLeadership(json::parse(*health, nullptr, /*allow_exceptions=*/false));
  return 0;
}

// In the order `pikv admin --help` lists them.
const AdminOp kAdminOps[] = {
    {"nodes", "Nodes, their state and tier usage", MsgType::kAdminNodes, ShowNodes},
    {"stats", "Cluster-wide hits, misses, bytes and chunks per tier; event rates",
     MsgType::kAdminStats, Show<pikv::cli::PrintStats>},
    {"health", "Is the cluster healthy", MsgType::kAdminHealth, ShowHealth},
    {"locate", "Where chunks are, by key or by token ids", MsgType::kLocate,
     Show<pikv::cli::PrintLocate>},
    {"score", "What each node would get of a chunk set, by tier, peer and missing tokens",
     MsgType::kScore, Show<pikv::cli::PrintScore>},
    {"clear", "Drop every chunk from one node's CPU and disk tiers, or all nodes'",
     MsgType::kAdminClear, Show<pikv::cli::PrintForwarded>},
    {"pin", "Pin chunks on every node holding them", MsgType::kAdminPin,
     Show<pikv::cli::PrintForwarded>},
    {"unpin", "Unpin chunks on every node", MsgType::kAdminUnpin, Show<pikv::cli::PrintForwarded>},
    {"evict", "Delete chunks from every node and the remote tier (Redis)", MsgType::kAdminEvict,
     Show<pikv::cli::PrintForwarded>},
    {"revoke", "Drop every object an engine wrote, on every node and in Redis, and refuse its key",
     MsgType::kAdminRevoke, Show<pikv::cli::PrintForwarded>},
};

CLI::App* AddAdmin(CLI::App& app, AdminOptions& o) {
  CLI::App* admin =
      app.add_subcommand("admin", "Query and administer the cluster through its controller");
  admin->require_subcommand(1);
  admin
      ->add_option("--controller", o.controller,
                   "Controller: an endpoint, a list, or etcd://h1:2379,...[/cluster] (env "
                   "PIKV_CONTROLLER)")
      ->capture_default_str();
  admin->add_option("--timeout", o.timeout, "How long to wait for the controller")
      ->capture_default_str();
  admin->add_flag("--json", o.json, "Print the controller's JSON instead of a table");
  admin->add_option("--curve-key", o.curve_key,
                    "Key pair PREFIX for a secure cluster (env PIKV_CURVE_KEY); changes need the "
                    "admin key");
  admin->add_option("--curve-keyring", o.curve_keyring,
                    "The cluster's keyring (env PIKV_CURVE_KEYRING)");
  // --controller, --timeout and --json may follow the operation too.
  for (const AdminOp& op : kAdminOps) admin->add_subcommand(op.name, op.help)->fallthrough();

  CLI::App* locate = admin->get_subcommand("locate");
  locate->add_option("keys", o.hex_keys, "Chunk keys (32 hex digits)");
  locate->add_option("--tokens", o.tokens, "Token ids, comma-separated (with --model ...)");
  locate->add_option("--model", o.model, "Model id of the key namespace");
  locate->add_option("--dtype", o.dtype, "KV dtype of the key namespace")->capture_default_str();
  locate->add_option("--rope", o.rope, "RoPE signature of the key namespace");
  locate->add_option("--mode", o.mode, "isolated or prefixed")->capture_default_str();
  locate->add_option("--host", o.host, "Rank replicas for a client on this host");
  CLI::App* score = admin->get_subcommand("score");
  score->add_option("keys", o.hex_keys, "The chunk set's keys (32 hex digits)")->required();
  score->add_option("--chunk-tokens", o.chunk_tokens, "Each chunk's tokens (default 1 each)")
      ->delimiter(',');
  score->add_option("--nodes", o.candidates, "Only these nodes (default every live one)")
      ->delimiter(',');
  admin->get_subcommand("clear")->add_option("--node", o.node, "Only this node");
  for (const char* name : {"pin", "unpin", "evict"}) {
    admin->get_subcommand(name)
        ->add_option("keys", o.hex_keys, "Chunk keys (32 hex digits)")
        ->required();
  }
  admin->get_subcommand("revoke")
      ->add_option("engine", o.engine, "The engine's name in the keyring")
      ->required();
  return admin;
}

// locate --tokens: the key of those token ids in the namespace the options
// name; nullopt, with the reason on stderr, when they do not name one.
std::optional<pikv::ChunkKey> TokensKey(const AdminOptions& o) {
  auto d = pikv::ParseDType(o.dtype);
  if (o.model.empty() || !d || (o.mode != "isolated" && o.mode != "prefixed")) {
    std::cerr << "pikv: locate --tokens needs --model, a valid --dtype and --mode\n";
    return std::nullopt;
  }
  std::vector<int32_t> ids;
  std::stringstream ss(o.tokens);
  for (std::string t; std::getline(ss, t, ',');) {
    try {
      ids.push_back(std::stoi(t));
    } catch (const std::exception&) {
      std::cerr << "pikv: '" << t << "' is not a token id\n";
      return std::nullopt;
    }
  }
  // The default tenant's key (a tenant's own keys differ: owner.h).
  pikv::KeyNamespace ns;
  ns.model_id = o.model;
  ns.dtype = *d;
  ns.rope_signature = o.rope;
  ns.attention_mode =
      o.mode == "isolated" ? pikv::AttentionMode::kIsolated : pikv::AttentionMode::kPrefixed;
  return pikv::MakeChunkKey(ns, ids);
}

// The keys an operation names; nullopt, with the reason on stderr, on bad usage.
std::optional<std::vector<pikv::ChunkKey>> ChunkKeys(const AdminOptions& o, bool locate) {
  std::vector<pikv::ChunkKey> keys;
  for (const auto& h : o.hex_keys) {
    auto k = pikv::ChunkKey::FromHex(h);
    if (!k) {
      std::cerr << "pikv: '" << h << "' is not a chunk key (32 hex digits)\n";
      return std::nullopt;
    }
    keys.push_back(*k);
  }
  if (locate && !o.tokens.empty()) {
    auto k = TokensKey(o);
    if (!k) return std::nullopt;
    keys.push_back(*k);
  }
  if (locate && keys.empty()) {
    std::cerr << "pikv: locate needs keys or --tokens\n";
    return std::nullopt;
  }
  return keys;
}

// The controller's CURVE keys; none when the options ask for no security.
pikv::Result<std::optional<pikv::CurveClientKeys>> ControllerKeys(const AdminOptions& o) {
  auto security = pikv::CurveSecurity::Load(o.curve_key, o.curve_keyring);
  if (!security.ok()) return security.status();
  if (!*security) return std::optional<pikv::CurveClientKeys>();
  auto keys = (*security)->ForController();
  if (!keys.ok()) return keys.status();
  return std::optional(std::move(*keys));
}

int RunAdmin(const CLI::App& admin, const AdminOptions& o) {
  const AdminOp& op =
      *std::find_if(std::begin(kAdminOps), std::end(kAdminOps),
                    [&](const AdminOp& op) { return admin.got_subcommand(op.name); });
  auto wait = pikv::ParseDuration(o.timeout);
  if (!wait.ok()) {
    std::cerr << "pikv: --timeout: " << wait.status().message() << "\n";
    return 2;
  }
  auto keys = ChunkKeys(o, op.type == MsgType::kLocate);
  if (!keys) return 2;
  const pikv::rpc::AdminArgs args{o.node, o.host, o.engine, o.chunk_tokens, {o.candidates}};
  auto curve = ControllerKeys(o);
  if (!curve.ok()) return Fail(curve.status().ToString());

  AdminClient client(pikv::coord::FindControllers(o.controller), *wait, *curve);
  auto reply = client.Json(op.type, *keys, args);
  if (!reply.ok()) {
    if (reply.code() == pikv::ErrorCode::kTimeout ||
        reply.code() == pikv::ErrorCode::kUnavailable) {
      return Fail("controller " + o.controller + " did not answer within " + o.timeout);
    }
    return Fail(reply.status().ToString());
  }
  if (o.json) {
    std::cout << *reply << "\n";
    return 0;
  }
  json j = json::parse(*reply, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Fail("controller sent unreadable JSON");
  try {
    return op.print(j, client);
  } catch (const json::exception& e) {
    return Fail(std::string("controller sent an unexpected document: ") + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pikv: operate a pikv cluster"};
  app.set_version_flag("--version", pikv::VersionLine("pikv"));
  app.require_subcommand(1);
  // Each subcommand parses into its options; --help lists them in this order.
  pikv::cli::DemoOptions demo_options;
  auto [demo, cluster] = AddDemo(app, demo_options);
  pikv::cli::ModelInfoOptions model_info_options;
  CLI::App* model_info = AddModelInfo(app, model_info_options);
  pikv::cli::KeyCommands key_commands(app);
  AdminOptions admin_options;
  CLI::App* admin = AddAdmin(app, admin_options);
  CLI::App* route = AddRoute(app);
  CLI11_PARSE(app, argc, argv);

  if (demo->parsed()) return pikv::cli::RunDemo(demo_options);
  if (cluster->parsed()) return pikv::cli::RunCluster(demo_options);
  if (model_info->parsed()) return pikv::cli::RunModelInfo(model_info_options);
  if (route->parsed()) return RunRoute(*route);
  if (auto status = key_commands.Run()) return *status;
  return RunAdmin(*admin, admin_options);  // require_subcommand(1): admin is what is left
}
