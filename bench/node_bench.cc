// node_bench: pikv-node GET/PUT throughput beside Redis and bare ZeroMQ.
//
// Starts, in this run, a real pikv-node (CPU tier only, arena prefaulted), a
// real redis-server, and a bare ZeroMQ server (this binary with --serve-zmq)
// that answers GETs zero-copy from preallocated buffers (as many as the GET
// working set, so its cache behaviour matches) and PUTs with an ack: the
// transport's ceiling. For 4 KiB, 1 MiB and 32 MiB objects, over tcp and
// ipc (Redis: tcp and its unix socket), with 1 and 4 concurrent clients, it
// measures PUT and GET ops/s and MiB/s. PUTs cycle through a pool larger
// than the node's CPU tier, so each PUT really stores (no dedupe hits); GETs
// read a resident set. Every cell is measured in several rounds, the three
// systems interleaved within each round so machine noise hits them alike;
// the table and JSON report the median round. A second pikv-node with
// security on (CURVE on tcp, keys made for this run) is measured beside the
// first over tcp ("pikv+curve"; ipc carries no CURVE): curve_*_vs_plain is
// what encryption costs. Prints a table, then one JSON line of figures.
//
//   build/bin/node_bench [--seconds 0.5] [--rounds 3]
#include <hiredis/hiredis.h>
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <zmq.hpp>

#include "bare_zmq_server.h"
#include "bench_util.h"
#include "pikv/common/units.h"
#include "pikv/rpc/node_client.h"
#include "pikv/transport/zmq_frames.h"
#include "test_support.h"

namespace pikv::bench {
namespace {

using testing::MakeObject;
using testing::TestObject;

constexpr uint64_t kNodeCpuBytes = 192ull << 20;
constexpr uint64_t kPutPoolBytes = 320ull << 20;  // > CPU tier: PUTs keep evicting
constexpr uint64_t kResidentBytes = 128ull << 20;

// ---- Workers ----------------------------------------------------------------

struct Setup {
  std::string pikv_tcp, pikv_ipc, zmq_tcp, zmq_ipc;
  std::string curve_tcp;  // the secure node
  CurveClientKeys curve;  // an engine's keys to dial it
  int redis_port = 0;
  std::string redis_unix;
};

struct Pools {
  std::vector<TestObject> objects;  // PUT pool; the first `resident` are the GET set
  size_t resident = 0;
};

std::atomic<uint64_t> g_errors{0};

redisContext* ConnectRedis(const Setup& s, bool unix_socket) {
  redisContext* c = unix_socket ? redisConnectUnix(s.redis_unix.c_str())
                                : redisConnect("127.0.0.1", s.redis_port);
  if (!c || c->err) throw std::runtime_error("cannot connect to redis");
  return c;
}

// A worker does one operation and says whether it succeeded with the bytes
// expected; a failed operation is counted apart and never as throughput.
using Worker = std::function<bool()>;

Worker PikvWorker(const std::string& ep, const Pools& pools, bool put, int thread,
                  std::optional<CurveClientKeys> curve = std::nullopt) {
  auto client =
      std::make_shared<rpc::NodeClient>(ep, std::chrono::seconds(60), WireLimits{}, curve);
  auto rng = std::make_shared<std::mt19937>(thread + 1);
  auto next = std::make_shared<size_t>(thread * pools.objects.size() / 4);
  return [client, rng, next, &pools, put] {
    if (put) {
      const TestObject& o = pools.objects[(*next)++ % pools.objects.size()];
      auto r = client->Put({&o.key, 1}, {&o.bytes, 1});
      return r.ok() && (*r)[0].ok();
    }
    const TestObject& o = pools.objects[(*rng)() % pools.resident];
    auto r = client->Get({&o.key, 1});
    return r.ok() && (*r)[0].ok() && (*r)[0]->size() == o.bytes.size();
  };
}

Worker RedisWorker(const Setup& s, bool unix_socket, const Pools& pools, bool put, int thread) {
  std::shared_ptr<redisContext> c(ConnectRedis(s, unix_socket), redisFree);
  auto rng = std::make_shared<std::mt19937>(thread + 1);
  auto next = std::make_shared<size_t>(thread * pools.objects.size() / 4);
  return [c, rng, next, &pools, put] {
    const TestObject& o = put ? pools.objects[(*next)++ % pools.objects.size()]
                              : pools.objects[(*rng)() % pools.resident];
    std::string key = o.key.Hex();
    redisReply* r =
        put ? static_cast<redisReply*>(redisCommand(c.get(), "SET %b %b", key.data(), key.size(),
                                                    o.bytes.data(), o.bytes.size()))
            : static_cast<redisReply*>(redisCommand(c.get(), "GET %b", key.data(), key.size()));
    const bool ok = r && r->type != REDIS_REPLY_ERROR && r->type != REDIS_REPLY_NIL &&
                    (put || static_cast<size_t>(r->len) == o.bytes.size());
    if (r) freeReplyObject(r);
    return ok;
  };
}

Worker ZmqWorker(const std::string& ep, const Pools& pools, bool put, int thread) {
  auto sock = std::make_shared<zmq::socket_t>(ClientContext(), zmq::socket_type::dealer);
  sock->set(zmq::sockopt::linger, 0);
  sock->connect(ep);
  auto frames = std::make_shared<std::vector<zmq::message_t>>();
  auto rng = std::make_shared<std::mt19937>(thread + 1);
  auto next = std::make_shared<size_t>(thread * pools.objects.size() / 4);
  const uint64_t size = pools.objects[0].bytes.size();
  return [sock, frames, rng, next, &pools, put, size] {
    if (put) {
      const TestObject& o = pools.objects[(*next)++ % pools.objects.size()];
      sock->send(zmq::str_buffer("P"), zmq::send_flags::sndmore);
      zmq::message_t body = ToFrame(o.bytes);
      sock->send(body, zmq::send_flags::none);
    } else {
      const uint64_t index = (*rng)() % pools.resident;
      char req[17] = {'G'};
      std::memcpy(req + 1, &size, 8);
      std::memcpy(req + 9, &index, 8);
      sock->send(zmq::buffer(req, 17), zmq::send_flags::none);
    }
    return RecvFrames(*sock, *frames) &&
           (put || (frames->size() == 2 && (*frames)[1].size() == size));
  };
}

// ---- The matrix ---------------------------------------------------------------

struct Cell {
  double ops = 0, mibps = 0;  // successful operations only; 0 for a failed cell
  uint64_t failed = 0;        // failed operations over the cell's rounds
};

// One timed run: successful operations per second, and how many failed.
struct Measured {
  double ok_per_second = 0;
  uint64_t failed = 0;
  uint64_t ok = 0;
};
Measured Measure(int threads, double seconds, uint64_t min_ops,
                 const std::function<Worker(int)>& make_worker) {
  std::atomic<uint64_t> failed{0};
  RunResult r = RunTimed(threads, seconds, min_ops, [&](int t) -> std::function<void()> {
    return [w = make_worker(t), &failed] {
      if (!w()) failed++;
    };
  });
  const uint64_t ok = r.ops - failed.load();
  g_errors += failed.load();
  return {r.seconds > 0 ? ok / r.seconds : 0, failed.load(), ok};
}

std::string SizeName(uint64_t size) {
  return size >= (1 << 20) ? std::to_string(size >> 20) + "mib"
                           : std::to_string(size >> 10) + "kib";
}

int Run(double seconds, int num_rounds, const std::vector<uint64_t>& sizes) {
  // Large frames are malloc'd by ZeroMQ and hiredis on receive; keep freed
  // ones in the heap so no system's numbers include mmap/page-fault churn.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);

  testing::TempDir dir;
  testing::RedisServer redis;
  auto node = testing::StartNode(
      {"--endpoint", "tcp://127.0.0.1:*", "--endpoint", "ipc://" + dir.str() + "/node.sock",
       "--data-dir", dir.str(), "--disk", "false", "--prefault", "true", "--cpu-capacity",
       std::to_string(kNodeCpuBytes), "--controller", "", "--log-level", "warn"});
  const std::string key_dir = dir.str() + "/keys";
  std::filesystem::create_directories(key_dir);
  if (Status st = WriteClusterKeys(key_dir, {"secure"}); !st.ok())
    throw std::runtime_error(st.ToString());
  testing::TempDir secure_dir;
  auto secure_node = testing::StartNode({"--endpoint",      "tcp://127.0.0.1:*",
                                         "--data-dir",      secure_dir.str(),
                                         "--disk",          "false",
                                         "--prefault",      "true",
                                         "--cpu-capacity",  std::to_string(kNodeCpuBytes),
                                         "--controller",    "",
                                         "--node-id",       "secure",
                                         "--curve-key",     key_dir + "/node-secure",
                                         "--curve-keyring", key_dir + "/keyring",
                                         "--log-level",     "warn"});
  auto engine_keys = CurveSecurity::Load(key_dir + "/engine", key_dir + "/keyring");
  if (!engine_keys.ok()) throw std::runtime_error(engine_keys.status().ToString());
  BareZmqServer echo({"tcp://127.0.0.1:*", "ipc://" + dir.str() + "/echo.sock"});
  Setup s{node.tcp,
          node.ipc,
          echo.endpoints()[0],
          echo.endpoints()[1],
          secure_node.tcp,
          *(*engine_keys)->ForNode("secure"),
          redis.port(),
          redis.unix_socket()};

  std::map<std::string, Cell> cells;  // "<system>_<op>_<transport>_<size>_c<clients>"
  Table table({"system", "op", "transport", "size", "clients", "ops/s", "MiB/s"});
  uint64_t faults_get_32mib = 0, gets_32mib = 0;
  for (uint64_t target : sizes) {
    Pools pools;
    const size_t pool_n = std::max<uint64_t>(8, kPutPoolBytes / target);
    for (size_t i = 0; i < pool_n; ++i)
      pools.objects.push_back(MakeObject(target * 131 + i, target));
    pools.resident = std::max<size_t>(2, kResidentBytes / pools.objects[0].bytes.size());
    const uint64_t size = pools.objects[0].bytes.size();
    const uint64_t min_ops = target >= (32u << 20) ? 8 : 32;
    std::cerr << "objects of " << FormatBytes(size) << ": " << pool_n << " in the PUT pool, "
              << pools.resident << " resident for GET\n";
    for (const std::string transport : {"tcp", "ipc"}) {
      for (int clients : {1, 4}) {
        for (bool put : {true, false}) {
          if (!put) {  // make the GET set resident everywhere (untimed)
            rpc::NodeClient c(s.pikv_tcp, std::chrono::seconds(60));
            rpc::NodeClient secure(s.curve_tcp, std::chrono::seconds(60), WireLimits{}, s.curve);
            for (size_t i = 0; i < pools.resident; ++i) {
              for (rpc::NodeClient* n : {&c, &secure}) {
                auto r = n->Put({&pools.objects[i].key, 1}, {&pools.objects[i].bytes, 1});
                if (!r.ok() || !(*r)[0].ok()) g_errors++;
              }
            }
            redisContext* rc = ConnectRedis(s, false);
            for (size_t i = 0; i < pools.resident; ++i) {
              std::string key = pools.objects[i].key.Hex();
              freeReplyObject(redisCommand(rc, "SET %b %b", key.data(), key.size(),
                                           pools.objects[i].bytes.data(),
                                           pools.objects[i].bytes.size()));
            }
            redisFree(rc);
          }
          const std::string op = put ? "put" : "get";
          const std::string& pikv_ep = transport == "tcp" ? s.pikv_tcp : s.pikv_ipc;
          const std::string& zmq_ep = transport == "tcp" ? s.zmq_tcp : s.zmq_ipc;
          const bool fault_cell =
              !put && target == (32u << 20) && transport == "tcp" && clients == 1;
          std::map<std::string, std::vector<double>> rounds;  // system -> ops/s per round
          std::map<std::string, uint64_t> failed;             // system -> failed operations
          for (int round = 0; round < num_rounds; ++round) {
            uint64_t faults_before = MinorFaults(node.process->pid());
            Measured pr = Measure(clients, seconds, min_ops,
                                  [&](int t) { return PikvWorker(pikv_ep, pools, put, t); });
            if (fault_cell) {
              faults_get_32mib += MinorFaults(node.process->pid()) - faults_before;
              gets_32mib += pr.ok;
            }
            rounds["pikv"].push_back(pr.ok_per_second);
            failed["pikv"] += pr.failed;
            Measured rr = Measure(clients, seconds, min_ops, [&](int t) {
              return RedisWorker(s, transport == "ipc", pools, put, t);
            });
            rounds["redis"].push_back(rr.ok_per_second);
            failed["redis"] += rr.failed;
            Measured zr = Measure(clients, seconds, min_ops,
                                  [&](int t) { return ZmqWorker(zmq_ep, pools, put, t); });
            rounds["zmq"].push_back(zr.ok_per_second);
            failed["zmq"] += zr.failed;
            if (transport == "tcp") {
              Measured cr = Measure(clients, seconds, min_ops, [&](int t) {
                return PikvWorker(s.curve_tcp, pools, put, t, s.curve);
              });
              rounds["curve"].push_back(cr.ok_per_second);
              failed["curve"] += cr.failed;
            }
          }
          for (const std::string system : {"pikv", "curve", "redis", "zmq"}) {
            if (!rounds.count(system)) continue;
            // A cell with any failed operation reports no throughput at all.
            const double ops = failed[system] ? 0 : Median(rounds[system]);
            Cell c{ops, ops * size / (1 << 20), failed[system]};
            cells[system + "_" + op + "_" + transport + "_" + SizeName(target) + "_c" +
                  std::to_string(clients)] = c;
            const std::string verdict = "FAILED (" + std::to_string(c.failed) + " errors)";
            table.Add({system == "curve" ? "pikv+curve" : system, op,
                       system == "redis" && transport == "ipc" ? "unix" : transport,
                       FormatBytes(size), std::to_string(clients),
                       c.failed ? verdict : Fixed(c.ops, 0), c.failed ? "-" : Fixed(c.mibps, 1)});
          }
        }
      }
    }
  }
  table.Print();

  // -1 when either cell failed (or was not measured): never a ratio of errors.
  auto ratio = [&](const std::string& a, const std::string& b) {
    if (!cells.count(a) || !cells.count(b) || cells[a].failed || cells[b].failed ||
        cells[b].mibps == 0)
      return -1.0;
    return cells[a].mibps / cells[b].mibps;
  };
  JsonLine json;
  json.Add("bench", std::string("node"));
  json.Add("seconds_per_cell", seconds);
  json.Add("rounds", num_rounds);
  for (const std::string sz : {"1mib", "32mib"}) {
    json.Add("get_" + sz + "_vs_redis",
             ratio("pikv_get_tcp_" + sz + "_c1", "redis_get_tcp_" + sz + "_c1"));
    json.Add("get_" + sz + "_vs_zmq",
             ratio("pikv_get_tcp_" + sz + "_c1", "zmq_get_tcp_" + sz + "_c1"));
    json.Add("get_" + sz + "_vs_redis_c4",
             ratio("pikv_get_tcp_" + sz + "_c4", "redis_get_tcp_" + sz + "_c4"));
    json.Add("get_" + sz + "_vs_zmq_c4",
             ratio("pikv_get_tcp_" + sz + "_c4", "zmq_get_tcp_" + sz + "_c4"));
    json.Add("get_" + sz + "_ipc_vs_redis_unix",
             ratio("pikv_get_ipc_" + sz + "_c1", "redis_get_ipc_" + sz + "_c1"));
    json.Add("get_" + sz + "_ipc_vs_zmq",
             ratio("pikv_get_ipc_" + sz + "_c1", "zmq_get_ipc_" + sz + "_c1"));
    json.Add("put_" + sz + "_vs_redis",
             ratio("pikv_put_tcp_" + sz + "_c1", "redis_put_tcp_" + sz + "_c1"));
  }
  // What CURVE costs: the secure node over the plain one, per size measured.
  for (uint64_t target : sizes) {
    const std::string sz = SizeName(target);
    for (const std::string op : {"get", "put"}) {
      for (const std::string c : {"c1", "c4"}) {
        const std::string cell = op + "_tcp_" + sz + "_" + c;
        json.Add("curve_" + op + "_" + sz + "_" + c + "_vs_plain",
                 ratio("curve_" + cell, "pikv_" + cell));
      }
    }
  }
  json.Add("node_minor_faults_per_get_32mib",
           gets_32mib ? static_cast<double>(faults_get_32mib) / gets_32mib : -1);
  json.Add("errors", static_cast<double>(g_errors.load()));
  for (const auto& [name, c] : cells) {
    json.Add(name + "_mibps", c.mibps);
    json.Add(name + "_ops", c.ops);
    if (c.failed) json.Add(name + "_failed", static_cast<double>(c.failed));
  }
  std::cout << json.str() << std::endl;
  return g_errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"pikv-node throughput beside Redis and bare ZeroMQ"};
  double seconds = 0.5;
  int rounds = 3;
  std::vector<std::string> serve;
  app.add_option("--seconds", seconds, "Measured seconds per cell and round")
      ->capture_default_str();
  app.add_option("--rounds", rounds, "Interleaved rounds per cell; the median is reported")
      ->capture_default_str();
  std::vector<std::string> size_names = {"4KiB", "1MiB", "32MiB"};
  app.add_option("--sizes", size_names, "Object sizes to measure")->capture_default_str();
  app.add_option("--serve-zmq", serve, "(internal) run the bare ZeroMQ server on these endpoints");
  CLI11_PARSE(app, argc, argv);
  if (!serve.empty()) return pikv::bench::ServeBareZmq(serve);
  std::vector<uint64_t> sizes;
  for (const auto& name : size_names) {
    auto v = pikv::ParseByteSize(name);
    if (!v.ok()) {
      std::cerr << "--sizes: " << v.status().message() << "\n";
      return 2;
    }
    sizes.push_back(*v);
  }
  return pikv::bench::Run(seconds, rounds, sizes);
}
