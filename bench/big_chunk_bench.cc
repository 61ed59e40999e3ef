// big_chunk_bench: real-size chunks through every path pikv has, beside a
// memcpy of the same bytes and a bare ZeroMQ transfer of them, in one run.
//
// Llama-3.1-8B's KV geometry (tests/device/model_configs/llama-3.1-8b.json:
// 32 layers, 8 KV heads of 128, bf16: 128 KiB per token), chunks of 1 K and
// 4 K tokens (128 and 512 MiB). A controller and two pikv-nodes (CPU tier
// only, 3 GiB, prefaulted), a client on each node's ipc socket (so on its
// zero-copy channel), vLLM's flash layout with 16-token blocks. Per size, the
// median of --repeats of:
//   memcpy       the object's bytes into a prefaulted buffer (the baseline)
//   zmq          the object streamed over a bare ZeroMQ tcp pair on loopback
//                in --stream-frame messages, copied out as they arrive (the
//                baseline of the pull, which streams in the same frames)
//   store        gather out of a paged cache into the local node's arena +
//                commit (the node verifies it)
//   fetch        plan + fetch from the local node (a lease: no bytes move)
//   remap        the fetched object into a second paged cache
//   hit path     plan + fetch + remap
//   pull         plan + fetch on the other node (a P2P pull through it)
//   redis        put + get of the object through the Redis tier (parts)
//   tcp          a remote client's put and get on node A over loopback tcp,
//                the object whole (one message) and in --stream-frame frames
// and the hit path per token beside an H100's recompute estimate (formula
// printed). Prints a table, then one JSON line (issue 13's headline keys).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <thread>
#include <zmq.hpp>

#include "bench_util.h"
#include "filled_cache.h"
#include "pikv/client/client.h"
#include "pikv/client/client_config.h"
#include "pikv/client/prompt.h"
#include "pikv/rpc/admin_client.h"
#include "pikv/rpc/node_client.h"
#include "pikv/storage/remote_tier.h"
#include "test_support.h"

namespace pikv::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The object's bytes streamed over a bare ZeroMQ tcp PAIR on loopback in
// messages of `frame` bytes (as a pull streams them), each copied into a
// destination buffer as it arrives; receiver in a thread.
double ZmqStreamMs(int port, const std::vector<uint8_t>& bytes, size_t frame) {
  zmq::context_t ctx;
  zmq::socket_t rx(ctx, zmq::socket_type::pair), tx(ctx, zmq::socket_type::pair);
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  rx.bind(endpoint);
  tx.connect(endpoint);
  std::vector<uint8_t> dest(bytes.size(), 1);
  Clock::time_point t0 = Clock::now();
  std::thread receiver([&] {
    for (size_t got = 0; got < dest.size();) {
      zmq::message_t m;
      if (!rx.recv(m)) return;
      std::memcpy(dest.data() + got, m.data(), m.size());
      got += m.size();
    }
  });
  for (size_t off = 0; off < bytes.size(); off += frame) {
    const size_t n = std::min(frame, bytes.size() - off);
    zmq::message_t out(const_cast<uint8_t*>(bytes.data()) + off, n, nullptr, nullptr);
    tx.send(out, zmq::send_flags::none);
  }
  receiver.join();
  return Ms(t0);
}

struct Figures {
  double memcpy_ms, zmq_ms, store_ms, fetch_ms, remap_ms, hit_ms, pull_ms, redis_put_ms,
      redis_get_ms;
  double tcp_put_ms[2], tcp_get_ms[2];  // [0] whole, [1] in frames
  uint64_t bytes;
};

// A remote client's put then get of `object` on the node at `tcp`; the key is
// deleted first so that the put stores.
void TcpRoundTrip(rpc::NodeClient& node, const ChunkKey& key, const SharedBuffer& object,
                  std::vector<double>& put, std::vector<double>& get) {
  (void)node.Delete({&key, 1});
  auto t0 = Clock::now();
  auto stored = node.Put({&key, 1}, {&object, 1});
  put.push_back(Ms(t0));
  if (!stored.ok() || !(*stored)[0].ok()) throw std::runtime_error("tcp put failed");
  t0 = Clock::now();
  auto got = node.Get({&key, 1});
  get.push_back(Ms(t0));
  if (!got.ok() || !(*got)[0].ok() || (*got)[0]->size() != object.size())
    throw std::runtime_error("tcp get failed");
}

Figures Measure(uint32_t tokens, int repeats, const client::ClientOptions& a,
                const client::ClientOptions& b, const std::string& controller,
                const std::string& node_a_tcp, const std::string& node_b,
                const std::string& redis_address, uint64_t stream_frame) {
  client::Client ca(a), cb(b);
  FilledCache source(a, tokens), dest(a, tokens);
  std::vector<int32_t> chunk(tokens);
  for (uint32_t t = 0; t < tokens; ++t) chunk[t] = int32_t(100000 + tokens + t);
  auto prompt = *client::FromSegments({chunk, {1, 2, 3}});
  Figures f{};
  std::vector<double> store, fetch, remap, hit, pull, memcpy_ms, zmq, rput, rget;
  SharedBuffer object;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    Status s = ca.StoreFromCache(ca.KeyOf(chunk), chunk, source.layout, source.slots, 0).get();
    store.push_back(Ms(t0));
    if (!s.ok()) throw std::runtime_error("store: " + s.ToString());

    t0 = Clock::now();
    auto plan = ca.MakePlan(prompt);
    auto got = ca.Fetch(plan);
    fetch.push_back(Ms(t0));
    if (!got[0].ok()) throw std::runtime_error("local fetch: " + got[0].status().ToString());
    object = *got[0];

    t0 = Clock::now();
    if (!ca.Remap(object, plan.chunks[0], dest.slots, dest.layout).ok())
      throw std::runtime_error("remap failed");
    remap.push_back(Ms(t0));

    t0 = Clock::now();
    auto plan2 = ca.MakePlan(prompt);
    auto got2 = ca.Fetch(plan2);
    if (!got2[0].ok() || !ca.Remap(*got2[0], plan2.chunks[0], dest.slots, dest.layout).ok())
      throw std::runtime_error("hit path failed");
    hit.push_back(Ms(t0));
  }
  f.bytes = object.size();
  // The controller must know node A holds it before node B can pull it.
  rpc::AdminClient admin(controller);
  const ChunkKey key = ca.KeyOf(chunk);
  for (auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(10);) {
    auto loc = admin.Locate({key});
    if (loc.ok() && !(*loc)[0].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  rpc::NodeClient b_node(node_b, std::chrono::seconds(30));
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    auto plan = cb.MakePlan(prompt);
    auto got = cb.Fetch(plan);
    pull.push_back(Ms(t0));
    if (plan.chunks[0].source != client::Source::kPeer || !got[0].ok())
      throw std::runtime_error("the pull did not happen");
    (void)b_node.Delete({&key, 1});  // the next pull crosses again
  }
  std::vector<uint8_t> src(object.data(), object.data() + object.size()), dst(object.size(), 1);
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), src.size());
    memcpy_ms.push_back(Ms(t0));
    zmq.push_back(ZmqStreamMs(testing::FreePort(), src, stream_frame));
  }
  auto parsed = storage::ParseRedisAddress(redis_address);
  storage::RemoteTierOptions ro = *parsed;
  ro.io_timeout = std::chrono::seconds(30);
  storage::RemoteTier tier(ro, nullptr);
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    if (!tier.Put(key, object).ok()) throw std::runtime_error("redis put failed");
    rput.push_back(Ms(t0));
    t0 = Clock::now();
    if (!tier.Get(key).ok()) throw std::runtime_error("redis get failed");
    rget.push_back(Ms(t0));
    (void)tier.Remove(key);
  }
  // A remote client keeps its connection (and its staging buffers).
  std::vector<double> tcp_put[2], tcp_get[2];
  rpc::NodeClient remote[2] = {rpc::NodeClient(node_a_tcp, std::chrono::seconds(60)),
                               rpc::NodeClient(node_a_tcp, std::chrono::seconds(60))};
  remote[1].set_stream_frame(stream_frame);
  for (int r = 0; r < repeats; ++r) {
    for (int framed = 0; framed < 2; ++framed)
      TcpRoundTrip(remote[framed], key, object, tcp_put[framed], tcp_get[framed]);
  }
  for (int framed = 0; framed < 2; ++framed) {
    f.tcp_put_ms[framed] = Median(tcp_put[framed]);
    f.tcp_get_ms[framed] = Median(tcp_get[framed]);
  }
  f.memcpy_ms = Median(memcpy_ms);
  f.zmq_ms = Median(zmq);
  f.store_ms = Median(store);
  f.fetch_ms = Median(fetch);
  f.remap_ms = Median(remap);
  f.hit_ms = Median(hit);
  f.pull_ms = Median(pull);
  f.redis_put_ms = Median(rput);
  f.redis_get_ms = Median(rget);
  return f;
}

int Run(int repeats, const std::vector<uint32_t>& sizes, uint64_t stream_frame, int store_threads) {
  testing::TempDir dir_a, dir_b;
  testing::RedisServer redis;
  auto controller = testing::StartController(
      {"--endpoint", "tcp://127.0.0.1:*", "--http", "", "--log-level", "error"});
  auto start_node = [&](testing::TempDir& d, const std::string& id) {
    return testing::StartClusterNode(d, id, controller.endpoint,
                                     {"--cpu-capacity", "3GiB", "--prefault", "true",
                                      "--pull-stream-frame", std::to_string(stream_frame)});
  };
  auto node_a = start_node(dir_a, "node-a"), node_b = start_node(dir_b, "node-b");
  auto options = [&](const testing::NodeProcess& n, const std::string& host) {
    std::map<std::string, std::string> s = {
        {"local-node", n.ipc},
        {"controller", controller.endpoint},
        {"host", host},
        {"model-id", "llama-3.1-8b"},
        {"model-config",
         std::string(PIKV_SOURCE_DIR) + "/tests/device/model_configs/llama-3.1-8b.json"},
        {"node-timeout", "60s"},
        {"store-threads", std::to_string(store_threads)},
        {"fetch-timeout", "60s"}};
    return *client::LoadClientOptions("", nullptr, s);
  };
  const auto a = options(node_a, "host-node-a"), b = options(node_b, "host-node-b");

  // An H100 recomputing the chunk: 2 FLOPs per parameter per token at the
  // dense bf16 tensor-core peak.
  const double params = 8.03e9, h100_flops = 989e12;
  const double recompute_us_per_token = 2 * params / h100_flops * 1e6;
  Table t({"tokens", "MiB", "path", "ms", "GB/s", "vs memcpy"});
  JsonLine json;
  for (uint32_t tokens : sizes) {
    Figures f = Measure(tokens, repeats, a, b, controller.endpoint, node_a.tcp, node_b.ipc,
                        redis.address(), stream_frame);
    const double gb = f.bytes / 1e9;
    const std::string k = std::to_string(tokens / 1024) + "k";
    auto row = [&](const std::string& path, double ms) {
      t.Add({std::to_string(tokens), Fixed(f.bytes / double(1 << 20), 0), path, Fixed(ms, 1),
             Fixed(gb / (ms / 1e3), 2), Fixed(ms / f.memcpy_ms, 2)});
    };
    row("memcpy (baseline)", f.memcpy_ms);
    row("bare zmq tcp stream, same frames", f.zmq_ms);
    row("store: gather + put (local)", f.store_ms);
    row("fetch: plan + get (local)", f.fetch_ms);
    row("remap", f.remap_ms);
    row("hit path: plan + get + remap", f.hit_ms);
    row("P2P pull through node B", f.pull_ms);
    row("redis put (parts)", f.redis_put_ms);
    row("redis get (parts)", f.redis_get_ms);
    row("tcp put, whole (remote client)", f.tcp_put_ms[0]);
    row("tcp put, in frames", f.tcp_put_ms[1]);
    row("tcp get, whole (remote client)", f.tcp_get_ms[0]);
    row("tcp get, in frames", f.tcp_get_ms[1]);
    json.Add("local_fetch_" + k + "_ms", f.fetch_ms);
    json.Add("local_hit_path_" + k + "_ms", f.hit_ms);
    json.Add("hit_path_vs_remap_" + k, f.hit_ms / f.remap_ms);
    json.Add("store_" + k + "_vs_memcpy", f.store_ms / f.memcpy_ms);
    json.Add("pull_" + k + "_gbps", gb / (f.pull_ms / 1e3));
    json.Add("pull_" + k + "_vs_zmq_stream", f.zmq_ms / f.pull_ms);
    json.Add("redis_round_trip_" + k + "_ms", f.redis_put_ms + f.redis_get_ms);
    json.Add("tcp_put_" + k + "_framed_gbps", gb / (f.tcp_put_ms[1] / 1e3));
    json.Add("tcp_get_" + k + "_framed_gbps", gb / (f.tcp_get_ms[1] / 1e3));
    json.Add("tcp_put_" + k + "_framed_vs_whole", f.tcp_put_ms[0] / f.tcp_put_ms[1]);
    json.Add("tcp_get_" + k + "_framed_vs_whole", f.tcp_get_ms[0] / f.tcp_get_ms[1]);
    json.Add("tcp_get_" + k + "_vs_zmq_stream", f.zmq_ms / f.tcp_get_ms[1]);
    json.Add("tcp_put_" + k + "_vs_zmq_stream", f.zmq_ms / f.tcp_put_ms[1]);
    json.Add("hit_path_" + k + "_us_per_token", f.hit_ms * 1e3 / tokens);
    json.Add("h100_recompute_us_per_token", recompute_us_per_token);
  }
  t.Print();
  std::cout << "H100 recompute estimate: 2 x " << params << " FLOPs/token / " << h100_flops
            << " FLOP/s = " << Fixed(recompute_us_per_token, 1) << " us/token\n";
  std::cout << json.str() << std::endl;
  return 0;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"Real-size chunks through every path, beside memcpy and bare ZeroMQ"};
  int repeats = 3;
  std::vector<uint32_t> sizes = {1024, 4096};
  app.add_option("--repeats", repeats)->check(CLI::Range(1, 50))->capture_default_str();
  app.add_option("--tokens", sizes, "Chunk sizes in tokens")->capture_default_str();
  uint64_t stream_frame = 1 << 20;
  app.add_option("--stream-frame", stream_frame, "Bytes per frame of streamed pulls, puts, gets")
      ->check(CLI::Range(uint64_t{pikv::kMinStreamFrame}, uint64_t{pikv::kMaxStreamFrame}))
      ->capture_default_str();
  int store_threads = 1;  // the client's default: the node hashes what it writes on another core
  app.add_option("--store-threads", store_threads, "Threads a local store gathers on")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return pikv::bench::Run(repeats, sizes, stream_frame, store_threads);
  } catch (const std::exception& e) {
    std::cerr << "big_chunk_bench: " << e.what() << "\n";
    return 1;
  }
}
