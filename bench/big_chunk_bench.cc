// big_chunk_bench: real-size chunks through every path pikv has, beside a
// memcpy of the same bytes and a bare ZeroMQ transfer of them, in one run.
//
// Llama-3.1-8B's KV geometry (tests/device/model_configs/llama-3.1-8b.json:
// 32 layers, 8 KV heads of 128, bf16: 128 KiB per token), chunks of 1 K and
// 4 K tokens (128 and 512 MiB). A controller and two pikv-nodes (CPU tier
// only, 3 GiB, measured once the arena is faulted in), a client on each
// node's ipc socket (so on its zero-copy channel), vLLM's flash layout with
// 16-token blocks. Per size, the median of --repeats of:
//   memcpy       the object's bytes into a faulted-in buffer, split over
//                --store-threads threads (the baseline; the store gathers
//                on as many, and keys name the count: _vs_memcpy_<n>t)
//   zmq          the object streamed on loopback tcp in --stream-frame
//                messages by a bare ZeroMQ server in another process (this
//                binary, --serve-zmq), copied out as they arrive: the
//                baseline of the pull and the tcp get, which stream in the
//                same frames between two processes; and the same with each
//                frame checksummed as it lands (a pull verifies what a peer
//                sends). Measured in pairs with the pull and the tcp get,
//                round by round; the _vs_zmq_stream ratios are the medians
//                of the per-round ratios
//   store        gather out of a paged cache into the local node's arena +
//                commit (the node verifies it)
//   fetch        plan + fetch from the local node (a lease: no bytes move)
//   remap        the fetched object into a second paged cache
//   hit path     plan + fetch + remap
//   pull         plan + fetch on the other node (a P2P pull through it)
//   redis        put + get of the object through the Redis tier (parts):
//                the get into memory of the tier's own, and into place (a
//                warm buffer, as a node reads a hit into its arena)
//   tcp          a remote client's put and get on node A over loopback tcp,
//                the object whole (one message) and in --stream-frame frames
// and the hit path per token beside an H100's recompute estimate (formula
// printed). Then the fill run (--fill-chunks, 0 = off): fresh nodes with a
// 4 GiB arena store distinct 512 MiB chunks one after another and the other
// node pulls each, so the arena fills past 2 GiB, in three configurations:
// prefault off, the default (faulting in the background, stores from the
// first moment), and the default once faulted in (the reference). Prints a
// table, then one JSON line.
#include <hiredis/hiredis.h>
#include <sys/mman.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <thread>
#include <zmq.hpp>

#include "../storage/src/resp_io.h"
#include "bare_zmq_server.h"
#include "bench_util.h"
#include "filled_cache.h"
#include "pikv/client/client.h"
#include "pikv/client/client_config.h"
#include "pikv/client/prompt.h"
#include "pikv/proto/checksum.h"
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

// The bare ZeroMQ server's object (bare_zmq_server.h: another process, as a
// node is) streamed on loopback tcp in messages of `frame` bytes, each
// copied into memory of this process as it arrives: what a get or a pull of
// the same bytes would cost with nothing of pikv's around it. `verify`: each
// frame is also hashed (XXH3, every byte) once copied, as a pull verifies
// what a peer sends: the least a transfer that checks its bytes can cost.
// (Not StreamingPayloadChecksum: it hashes from where the object's header
// says the payload starts, and the bare server's bytes are no chunk object,
// so it hashed nothing.)
class BareStream {
 public:
  BareStream(const std::string& endpoint, uint64_t size, uint64_t frame, bool verify)
      : dealer_(context_, zmq::socket_type::dealer),
        dest_(size, 1),
        frame_(frame),
        verify_(verify) {
    dealer_.set(zmq::sockopt::linger, 0);
    dealer_.set(zmq::sockopt::rcvtimeo, 60'000);
    dealer_.connect(endpoint);
    TimedMs();  // the server makes and faults in its object
  }

  double TimedMs() {
    char request[17] = {'S'};
    const uint64_t size = dest_.size();
    std::memcpy(request + 1, &size, 8);
    std::memcpy(request + 9, &frame_, 8);
    auto t0 = Clock::now();
    dealer_.send(zmq::buffer(request, sizeof request), zmq::send_flags::none);
    zmq::message_t m;
    if (!dealer_.recv(m)) throw std::runtime_error("the bare stream did not start");
    Xxh3Stream checksum;
    for (uint64_t got = 0; got < size; got += m.size()) {
      if (!dealer_.recv(m) || m.size() > size - got)
        throw std::runtime_error("the bare stream stalled or overran");
      std::memcpy(dest_.data() + got, m.data(), m.size());
      if (verify_) checksum.Update({dest_.data() + got, m.size()});
    }
    if (verify_) sink_ ^= checksum.Digest();
    return Ms(t0);
  }

 private:
  zmq::context_t context_;
  zmq::socket_t dealer_;
  std::vector<uint8_t> dest_;
  uint64_t frame_;
  bool verify_;
  uint64_t sink_ = 0;  // the digests, so that the checksum is not optimised away
};

// Paired rounds of a path and its baseline: the median of each, and the
// median of the per-round ratios baseline / path (noise hits a pair alike).
struct Paired {
  std::vector<double> path, baseline, ratio;
  void Add(double path_ms, double baseline_ms) {
    path.push_back(path_ms);
    baseline.push_back(baseline_ms);
    ratio.push_back(baseline_ms / path_ms);
  }
};

// memcpy of `src` into `dst` split over `threads` threads (the store's
// gather splits its rows the same way).
double MemcpyMs(const std::vector<uint8_t>& src, std::vector<uint8_t>& dst, int threads) {
  auto t0 = Clock::now();
  std::vector<std::thread> pool;
  const size_t per = (src.size() + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) {
    const size_t from = std::min(src.size(), i * per), n = std::min(per, src.size() - from);
    pool.emplace_back([&, from, n] { std::memcpy(dst.data() + from, src.data() + from, n); });
  }
  for (auto& t : pool) t.join();
  return Ms(t0);
}

// The same copy into memory never touched before (the first store's
// baseline: its destination is as cold).
double MemcpyFreshMs(const std::vector<uint8_t>& src) {
  auto t0 = Clock::now();
  void* fresh =
      mmap(nullptr, src.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (fresh == MAP_FAILED) throw std::runtime_error("mmap failed");
  std::memcpy(fresh, src.data(), src.size());
  const double ms = Ms(t0);
  munmap(fresh, src.size());
  return ms;
}

// Waits until the node's arena is wholly faulted in (its background
// prefault), so that what is measured next does not share the machine with it.
void WaitFaultedIn(const std::string& node, uint64_t arena_bytes) {
  rpc::NodeClient c(node, std::chrono::seconds(5));
  for (auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::minutes(2);) {
    auto s = c.Stats();
    if (s.ok()) {
      auto it = s->find("cpu.faulted_bytes");
      if (it != s->end() && std::get<int64_t>(it->second) >= static_cast<int64_t>(arena_bytes))
        return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("the arena of " + node + " was not faulted in within 2 minutes");
}

// The object's bytes SET and then GET on the same redis-server, in the
// remote tier's parts, by two bare clients with no manifest and no check:
// hiredis (each part's reply copied into place, as a hiredis user must) and
// the least a client can do: one writev per part and each reply read straight into place
// (storage/src/resp_io.h, which the tier itself uses).
struct RawRedis {
  double hiredis_put_ms = 0, hiredis_get_ms = 0, bare_put_ms = 0, bare_get_ms = 0;
};

RawRedis RawRedisMs(const std::string& host, int port, const SharedBuffer& object,
                    uint64_t part_bytes) {
  redisContext* c = redisConnect(host.c_str(), port);
  if (!c || c->err) throw std::runtime_error("cannot connect to redis");
  std::unique_ptr<redisContext, decltype(&redisFree)> owned(c, redisFree);
  std::vector<uint8_t> into(object.size(), 1);
  const uint64_t parts = (object.size() + part_bytes - 1) / part_bytes;
  auto part = [&](uint64_t i) {
    const uint64_t at = i * part_bytes;
    return std::pair<uint64_t, uint64_t>{at, std::min(part_bytes, object.size() - at)};
  };
  auto name = [](uint64_t i) { return "raw:" + std::to_string(i); };
  RawRedis r;
  auto t0 = Clock::now();
  for (uint64_t i = 0; i < parts; ++i) {
    const auto [at, n] = part(i);
    const std::string k = name(i);
    auto* reply = static_cast<redisReply*>(
        redisCommand(c, "SET %b %b", k.data(), k.size(), object.data() + at, n));
    if (!reply || reply->type != REDIS_REPLY_STATUS) throw std::runtime_error("raw SET failed");
    freeReplyObject(reply);
  }
  r.hiredis_put_ms = Ms(t0);
  t0 = Clock::now();
  for (uint64_t i = 0; i < parts; ++i) {
    const auto [at, n] = part(i);
    const std::string k = name(i);
    auto* reply = static_cast<redisReply*>(redisCommand(c, "GET %b", k.data(), k.size()));
    if (!reply || reply->type != REDIS_REPLY_STRING || static_cast<uint64_t>(reply->len) != n)
      throw std::runtime_error("raw GET failed");
    std::memcpy(into.data() + at, reply->str, n);
    freeReplyObject(reply);
  }
  r.hiredis_get_ms = Ms(t0);
  t0 = Clock::now();
  for (uint64_t i = 0; i < parts; ++i) {
    const auto [at, n] = part(i);
    const std::string k = name(i);
    const std::string_view set[] = {
        "SET", k, {reinterpret_cast<const char*>(object.data()) + at, n}};
    if (!storage::resp::WriteCommand(c->fd, set).ok()) throw std::runtime_error("bare SET failed");
  }
  storage::resp::Reader replies(c->fd);
  for (uint64_t i = 0; i < parts; ++i) {
    auto reply = replies.ReadStatus();
    if (!reply.ok() || reply->kind != storage::resp::BulkReply::Kind::kStatus)
      throw std::runtime_error("bare SET failed");
  }
  r.bare_put_ms = Ms(t0);
  t0 = Clock::now();
  for (uint64_t i = 0; i < parts; ++i) {
    const std::string k = name(i);
    const std::string_view get[] = {"GET", k};
    if (!storage::resp::WriteCommand(c->fd, get).ok()) throw std::runtime_error("bare GET failed");
  }
  for (uint64_t i = 0; i < parts; ++i) {
    const auto [at, n] = part(i);
    auto reply = replies.ReadBulk(n, {into.data() + at, n});
    if (!reply.ok() || reply->kind != storage::resp::BulkReply::Kind::kValue)
      throw std::runtime_error("bare GET failed");
  }
  r.bare_get_ms = Ms(t0);
  for (uint64_t i = 0; i < parts; ++i) freeReplyObject(redisCommand(c, "DEL %s", name(i).c_str()));
  return r;
}

struct Figures {
  double store_first_ms, memcpy_fresh_ms;
  double memcpy_ms, zmq_ms, zmq_verified_ms, store_ms, fetch_ms, remap_ms, hit_ms, pull_ms,
      redis_put_ms, redis_get_ms, redis_get_placed_ms;
  // Median per-round ratios, bare stream / path (higher is better for pikv).
  double pull_vs_zmq, pull_vs_zmq_verified, tcp_get_vs_zmq;
  RawRedis raw_redis;
  double tcp_put_ms[2], tcp_get_ms[2];  // [0] whole, [1] in frames
  uint64_t bytes;
};

// The chunk's tokens: distinct per size.
std::vector<int32_t> ChunkTokens(uint32_t tokens) {
  std::vector<int32_t> chunk(tokens);
  for (uint32_t t = 0; t < tokens; ++t) chunk[t] = int32_t(100000 + tokens + t);
  return chunk;
}

// Where the run's processes listen, and how it moves bytes.
struct Setup {
  client::ClientOptions a, b;  // clients of node A and node B (their ipc)
  std::string controller, node_a_tcp, node_b_ipc, redis, bare_zmq;
  uint64_t stream_frame = 0;
  int threads = 1;  // the store's gather, and the memcpy baseline's
};

// The chunk node A holds once MeasureLocal is done.
struct Stored {
  ChunkKey key;
  SharedBuffer object;
};

// The local paths on node A: stores out of a paged cache, fetches, remaps,
// the whole hit path. Leaves the chunk stored.
Stored MeasureLocal(const Setup& s, uint32_t tokens, int repeats, Figures& f) {
  client::Client ca(s.a);
  FilledCache source(s.a, tokens), dest(s.a, tokens);
  const std::vector<int32_t> chunk = ChunkTokens(tokens);
  auto prompt = *client::FromSegments({chunk, {1, 2, 3}});
  std::vector<double> store, fetch, remap, hit;
  SharedBuffer object;
  auto store_once = [&] {
    auto t0 = Clock::now();
    Status st = ca.StoreFromCache(ca.KeyOf(chunk), chunk, source.layout, source.slots, 0).get();
    if (!st.ok()) throw std::runtime_error("store: " + st.ToString());
    return Ms(t0);
  };
  // A client's first store into its node's arena maps every page it writes
  // (the node's pages exist; this process's page tables for them do not):
  // once per region of the arena, for an engine storing all day. Timed
  // apart. A store of the same key again is dropped as a duplicate once
  // written, and the space it reserved is handed out again to the next: so
  // after one more, untimed, the timed stores write space this client has
  // written before, a warm destination, as the memcpy baseline does.
  f.store_first_ms = store_once();
  store_once();
  for (int r = 0; r < repeats; ++r) {
    store.push_back(store_once());
    auto t0 = Clock::now();
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
  f.store_ms = Median(store);
  f.fetch_ms = Median(fetch);
  f.remap_ms = Median(remap);
  f.hit_ms = Median(hit);
  f.bytes = object.size();
  return {ca.KeyOf(chunk), object};
}

// Node B's client fetching the chunk node A holds: a P2P pull through node B,
// each beside a bare stream and a verified bare stream of as many bytes.
void MeasurePull(const Setup& s, uint32_t tokens, int repeats, const ChunkKey& key, Figures& f) {
  BareStream bare(s.bare_zmq, f.bytes, s.stream_frame, false),
      verified(s.bare_zmq, f.bytes, s.stream_frame, true);
  client::Client cb(s.b);
  auto prompt = *client::FromSegments({ChunkTokens(tokens), {1, 2, 3}});
  // The controller must know node A holds it before node B can pull it.
  rpc::AdminClient admin(s.controller);
  for (auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(10);) {
    auto loc = admin.Locate({key});
    if (loc.ok() && !(*loc)[0].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  rpc::NodeClient b_node(s.node_b_ipc, std::chrono::seconds(30));
  Paired pull, pull_verified;
  for (int r = 0; r < repeats; ++r) {
    const double bare_ms = bare.TimedMs(), verified_ms = verified.TimedMs();
    auto t0 = Clock::now();
    auto plan = cb.MakePlan(prompt);
    auto got = cb.Fetch(plan);
    const double pull_ms = Ms(t0);
    if (plan.chunks[0].source != client::Source::kPeer || !got[0].ok())
      throw std::runtime_error("the pull did not happen");
    (void)b_node.Delete({&key, 1});  // the next pull crosses again
    pull.Add(pull_ms, bare_ms);
    pull_verified.Add(pull_ms, verified_ms);
  }
  f.pull_ms = Median(pull.path);
  f.zmq_ms = Median(pull.baseline);
  f.zmq_verified_ms = Median(pull_verified.baseline);
  f.pull_vs_zmq = Median(pull.ratio);
  f.pull_vs_zmq_verified = Median(pull_verified.ratio);
}

// The memcpy baselines: the object's bytes into a warm destination and into
// fresh memory.
void MeasureMemcpy(const Setup& s, int repeats, const SharedBuffer& object, Figures& f) {
  std::vector<uint8_t> src(object.data(), object.data() + object.size()), dst(object.size(), 1);
  std::vector<double> memcpy_ms;
  for (int r = 0; r < repeats; ++r) {
    memcpy_ms.push_back(MemcpyMs(src, dst, s.threads));
    if (r == 0) f.memcpy_fresh_ms = MemcpyFreshMs(src);
  }
  f.memcpy_ms = Median(memcpy_ms);
}

// The object through the Redis tier, beside bare clients of the same server.
void MeasureRedis(const Setup& s, int repeats, const ChunkKey& key, const SharedBuffer& object,
                  Figures& f) {
  auto parsed = storage::ParseRedisAddress(s.redis);
  storage::RemoteTierOptions ro = *parsed;
  ro.io_timeout = std::chrono::seconds(30);
  storage::RemoteTier tier(ro, nullptr);
  std::vector<double> rput, rget, rget_placed;
  std::vector<RawRedis> raw;
  // A node reads a hit into CPU-tier space it reserved (StorageManager::Get):
  // here a warm buffer of this process's, as the bare GET's is.
  std::vector<uint8_t> place(object.size(), 1);
  auto into_place = [&](size_t, uint64_t size) {
    return size == place.size() ? std::span<uint8_t>(place) : std::span<uint8_t>{};
  };
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    if (!tier.Put(key, object).ok()) throw std::runtime_error("redis put failed");
    rput.push_back(Ms(t0));
    // The two gets in turns, first one then the other.
    for (int turn = 0; turn < 2; ++turn) {
      t0 = Clock::now();
      if ((turn + r) % 2 == 0) {
        if (!tier.Get(key).ok()) throw std::runtime_error("redis get failed");
        rget.push_back(Ms(t0));
        continue;
      }
      auto placed = tier.GetManyPlaced({&key, 1}, into_place);
      rget_placed.push_back(Ms(t0));
      if (!placed[0].ok() || placed[0]->data() != place.data())
        throw std::runtime_error("redis get into place failed");
    }
    (void)tier.Remove(key);
    raw.push_back(RawRedisMs(ro.host, ro.port, object, ro.part_bytes));
  }
  auto median_of = [&](double RawRedis::*field) {
    std::vector<double> v;
    for (const auto& r : raw) v.push_back(r.*field);
    return Median(v);
  };
  f.raw_redis = {median_of(&RawRedis::hiredis_put_ms), median_of(&RawRedis::hiredis_get_ms),
                 median_of(&RawRedis::bare_put_ms), median_of(&RawRedis::bare_get_ms)};
  f.redis_put_ms = Median(rput);
  f.redis_get_ms = Median(rget);
  f.redis_get_placed_ms = Median(rget_placed);
}

// A remote client's puts and gets on node A over tcp, whole and in frames:
// the puts (each after a delete, so that it stores), then the gets; each
// framed get beside a bare stream of as many bytes (the bare server streams
// downward only: puts have no bare baseline).
void MeasureTcp(const Setup& s, int repeats, const ChunkKey& key, const SharedBuffer& object,
                Figures& f) {
  BareStream bare(s.bare_zmq, object.size(), s.stream_frame, false);
  for (int framed = 0; framed < 2; ++framed) {
    // A remote client keeps its connection (and its staging buffers).
    rpc::NodeClient remote(s.node_a_tcp, std::chrono::seconds(60));
    if (framed) remote.set_stream_frame(s.stream_frame);
    Paired get;
    std::vector<double> put;
    for (int r = 0; r < repeats; ++r) {
      (void)remote.Delete({&key, 1});
      auto t0 = Clock::now();
      auto stored = remote.Put({&key, 1}, {&object, 1});
      put.push_back(Ms(t0));
      if (!stored.ok() || !(*stored)[0].ok()) throw std::runtime_error("tcp put failed");
    }
    for (int r = 0; r < repeats; ++r) {
      const double bare_ms = framed ? bare.TimedMs() : 0;
      auto t0 = Clock::now();
      auto got = remote.Get({&key, 1});
      get.Add(Ms(t0), bare_ms);
      if (!got.ok() || !(*got)[0].ok() || (*got)[0]->size() != object.size())
        throw std::runtime_error("tcp get failed");
    }
    f.tcp_put_ms[framed] = Median(put);
    f.tcp_get_ms[framed] = Median(get.path);
    if (framed) f.tcp_get_vs_zmq = Median(get.ratio);
  }
}

Figures Measure(const Setup& s, uint32_t tokens, int repeats) {
  Figures f{};
  const auto [key, object] = MeasureLocal(s, tokens, repeats, f);
  MeasurePull(s, tokens, repeats, key, f);
  MeasureMemcpy(s, repeats, object, f);
  MeasureRedis(s, repeats, key, object, f);
  MeasureTcp(s, repeats, key, object, f);
  return f;
}

// A client of the node on `ipc` (its host's name is `host`).
client::ClientOptions ClientFor(const std::string& ipc, const std::string& host,
                                const std::string& controller, int store_threads) {
  std::map<std::string, std::string> s = {
      {"local-node", ipc},
      {"controller", controller},
      {"host", host},
      {"model-id", "llama-3.1-8b"},
      {"model-config",
       std::string(PIKV_SOURCE_DIR) + "/tests/device/model_configs/llama-3.1-8b.json"},
      {"node-timeout", "60s"},
      {"store-threads", std::to_string(store_threads)},
      {"fetch-timeout", "60s"}};
  return *client::LoadClientOptions("", nullptr, s);
}

// The fill run: per configuration, fresh nodes A and B (4 GiB arenas); A
// stores `chunks` distinct 512 MiB chunks one after another, B pulls each.
// Store and pull times by the fill level before each.
struct FillMode {
  std::string name;
  std::vector<std::string> node_args;
  bool wait_faulted;
};
struct FillTimes {
  std::vector<double> store_ms, pull_ms;
};
constexpr uint32_t kFillTokens = 4096;
constexpr uint64_t kFillArena = 4ull << 30;

FillTimes FillRun(const FillMode& mode, int mode_index, int chunks, const std::string& controller,
                  int store_threads, const FilledCache& source) {
  testing::TempDir dir_a, dir_b;
  const std::string id = "fill" + std::to_string(mode_index);
  std::vector<std::string> args = {"--cpu-capacity", std::to_string(kFillArena)};
  args.insert(args.end(), mode.node_args.begin(), mode.node_args.end());
  auto node_a = testing::StartClusterNode(dir_a, id + "-a", controller, args);
  auto node_b = testing::StartClusterNode(dir_b, id + "-b", controller, args);
  if (mode.wait_faulted) {
    WaitFaultedIn(node_a.tcp, kFillArena);
    WaitFaultedIn(node_b.tcp, kFillArena);
  }
  client::Client ca(ClientFor(node_a.ipc, "host-" + id + "-a", controller, store_threads)),
      cb(ClientFor(node_b.ipc, "host-" + id + "-b", controller, store_threads));
  rpc::AdminClient admin(controller);
  FillTimes out;
  for (int i = 0; i < chunks; ++i) {
    std::vector<int32_t> chunk(kFillTokens);
    for (uint32_t t = 0; t < kFillTokens; ++t)
      chunk[t] = int32_t((1000 + i * kFillTokens + mode_index * 40000 + t) % 128000);
    const ChunkKey key = ca.KeyOf(chunk);
    auto t0 = Clock::now();
    Status s = ca.StoreFromCache(key, chunk, source.layout, source.slots, 0).get();
    out.store_ms.push_back(Ms(t0));
    if (!s.ok()) throw std::runtime_error("fill store: " + s.ToString());
    for (auto w = Clock::now(); Clock::now() - w < std::chrono::seconds(10);) {
      auto loc = admin.Locate({key});
      if (loc.ok() && !(*loc)[0].empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto prompt = *client::FromSegments({chunk, {1, 2, 3}});
    t0 = Clock::now();
    auto plan = cb.MakePlan(prompt);
    auto got = cb.Fetch(plan);
    out.pull_ms.push_back(Ms(t0));
    if (plan.chunks[0].source != client::Source::kPeer || !got[0].ok())
      throw std::runtime_error("fill pull did not happen");
  }
  return out;
}

// Median over the fill levels from `from` bytes on.
double MedianPast(const std::vector<double>& ms, uint64_t from) {
  std::vector<double> v;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (i * (kFillTokens * 128ull << 10) >= from) v.push_back(ms[i]);
  }
  return v.empty() ? 0 : Median(v);
}

void ReportFill(int chunks, const std::string& controller, int store_threads, JsonLine& json) {
  const FillMode modes[] = {{"prefault off", {"--prefault", "false"}, false},
                            {"default", {}, false},
                            {"default, faulted in", {}, true}};
  FilledCache source(ClientFor("ipc:///nonexistent", "none", controller, 1), kFillTokens);
  std::vector<FillTimes> times;
  for (size_t m = 0; m < std::size(modes); ++m)
    times.push_back(
        FillRun(modes[m], static_cast<int>(m), chunks, controller, store_threads, source));
  Table t({"arena filled", "store: prefault off", "default", "default, faulted in",
           "pull: prefault off", "default", "default, faulted in"});
  const uint64_t chunk_bytes = kFillTokens * 128ull << 10;
  double store_max = 0, pull_max = 0;
  for (int i = 0; i < chunks; ++i) {
    std::vector<std::string> row = {Fixed(i * chunk_bytes / double(1ull << 30), 1) + " GiB"};
    for (const auto& tm : times) row.push_back(Fixed(tm.store_ms[i], 0) + " ms");
    for (const auto& tm : times) row.push_back(Fixed(tm.pull_ms[i], 0) + " ms");
    t.Add(row);
    store_max = std::max(store_max, times[1].store_ms[i] / times[2].store_ms[i]);
    pull_max = std::max(pull_max, times[1].pull_ms[i] / times[2].pull_ms[i]);
  }
  std::cout << "\nFill run: 512 MiB chunks stored on node A and pulled by node B, 4 GiB arenas\n";
  t.Print();
  const uint64_t past = 2ull << 30;
  const char* names[] = {"prefault_off", "default", "faulted"};
  for (size_t m = 0; m < std::size(modes); ++m) {
    json.Add(std::string("fill_store_4k_past_2g_") + names[m] + "_ms",
             MedianPast(times[m].store_ms, past));
    json.Add(std::string("fill_pull_4k_past_2g_") + names[m] + "_ms",
             MedianPast(times[m].pull_ms, past));
  }
  for (size_t m : {0, 1}) {
    json.Add(std::string("fill_store_4k_past_2g_") + names[m] + "_vs_faulted",
             MedianPast(times[m].store_ms, past) / MedianPast(times[2].store_ms, past));
    json.Add(std::string("fill_pull_4k_past_2g_") + names[m] + "_vs_faulted",
             MedianPast(times[m].pull_ms, past) / MedianPast(times[2].pull_ms, past));
  }
  json.Add("fill_store_4k_default_vs_faulted_worst_level", store_max);
  json.Add("fill_pull_4k_default_vs_faulted_worst_level", pull_max);
}

int Run(int repeats, const std::vector<uint32_t>& sizes, uint64_t stream_frame, int store_threads,
        int fill_chunks) {
  testing::TempDir dir_a, dir_b;
  testing::RedisServer redis;
  auto controller = testing::StartController(
      {"--endpoint", "tcp://127.0.0.1:*", "--http", "", "--log-level", "error"});
  constexpr uint64_t kArena = 3ull << 30;
  auto start_node = [&](testing::TempDir& d, const std::string& id) {
    return testing::StartClusterNode(d, id, controller.endpoint,
                                     {"--cpu-capacity", std::to_string(kArena),
                                      "--pull-stream-frame", std::to_string(stream_frame)});
  };
  auto node_a = start_node(dir_a, "node-a"), node_b = start_node(dir_b, "node-b");
  WaitFaultedIn(node_a.tcp, kArena);
  WaitFaultedIn(node_b.tcp, kArena);
  BareZmqServer bare_zmq({"tcp://127.0.0.1:*"});
  Setup setup{ClientFor(node_a.ipc, "host-node-a", controller.endpoint, store_threads),
              ClientFor(node_b.ipc, "host-node-b", controller.endpoint, store_threads),
              controller.endpoint,
              node_a.tcp,
              node_b.ipc,
              redis.address(),
              bare_zmq.endpoints()[0],
              stream_frame,
              store_threads};

  // An H100 recomputing the chunk: 2 FLOPs per parameter per token at the
  // dense bf16 tensor-core peak.
  const double params = 8.03e9, h100_flops = 989e12;
  const double recompute_us_per_token = 2 * params / h100_flops * 1e6;
  Table t({"tokens", "MiB", "path", "ms", "GB/s", "vs memcpy"});
  JsonLine json;
  const std::string nt = std::to_string(store_threads) + "t";
  for (uint32_t tokens : sizes) {
    Figures f = Measure(setup, tokens, repeats);
    const double gb = f.bytes / 1e9;
    const std::string k = std::to_string(tokens / 1024) + "k";
    auto row = [&](const std::string& path, double ms) {
      t.Add({std::to_string(tokens), Fixed(f.bytes / double(1 << 20), 0), path, Fixed(ms, 1),
             Fixed(gb / (ms / 1e3), 2), Fixed(ms / f.memcpy_ms, 2)});
    };
    row("memcpy (baseline, " + std::to_string(store_threads) + " threads)", f.memcpy_ms);
    row("bare zmq tcp stream, same frames, 2 processes", f.zmq_ms);
    row("the same, each frame checksummed (verified)", f.zmq_verified_ms);
    row("memcpy into fresh memory (1 thread)", f.memcpy_fresh_ms);
    row("first store into the arena (cold mapping)", f.store_first_ms);
    row("store: gather (" + std::to_string(store_threads) + " threads) + put (local)", f.store_ms);
    row("fetch: plan + get (local)", f.fetch_ms);
    row("remap", f.remap_ms);
    row("hit path: plan + get + remap", f.hit_ms);
    row("P2P pull through node B", f.pull_ms);
    row("redis put (parts)", f.redis_put_ms);
    row("redis get (parts), into memory of its own", f.redis_get_ms);
    row("redis get (parts), into place (a node's promote)", f.redis_get_placed_ms);
    row("raw redis SET, same parts: hiredis", f.raw_redis.hiredis_put_ms);
    row("raw redis GET, same parts: hiredis", f.raw_redis.hiredis_get_ms);
    row("raw redis SET, same parts: bare writev", f.raw_redis.bare_put_ms);
    row("raw redis GET, same parts: bare, into place", f.raw_redis.bare_get_ms);
    row("tcp put, whole (remote client)", f.tcp_put_ms[0]);
    row("tcp put, in frames", f.tcp_put_ms[1]);
    row("tcp get, whole (remote client)", f.tcp_get_ms[0]);
    row("tcp get, in frames", f.tcp_get_ms[1]);
    json.Add("local_fetch_" + k + "_ms", f.fetch_ms);
    json.Add("local_hit_path_" + k + "_ms", f.hit_ms);
    json.Add("hit_path_vs_remap_" + k, f.hit_ms / f.remap_ms);
    json.Add("memcpy_" + k + "_" + nt + "_ms", f.memcpy_ms);
    json.Add("store_" + k + "_" + nt + "_vs_memcpy_" + nt, f.store_ms / f.memcpy_ms);
    json.Add("first_store_" + k + "_vs_memcpy_fresh", f.store_first_ms / f.memcpy_fresh_ms);
    json.Add("pull_" + k + "_gbps", gb / (f.pull_ms / 1e3));
    json.Add("pull_" + k + "_vs_zmq_stream", f.pull_vs_zmq);
    json.Add("pull_" + k + "_vs_zmq_stream_verified", f.pull_vs_zmq_verified);
    json.Add("redis_round_trip_" + k + "_ms", f.redis_put_ms + f.redis_get_placed_ms);
    json.Add("redis_put_" + k + "_vs_raw_bare", f.raw_redis.bare_put_ms / f.redis_put_ms);
    json.Add("redis_get_" + k + "_vs_raw_bare", f.raw_redis.bare_get_ms / f.redis_get_placed_ms);
    json.Add("redis_get_own_memory_" + k + "_vs_raw_bare",
             f.raw_redis.bare_get_ms / f.redis_get_ms);
    json.Add("redis_put_" + k + "_vs_raw_hiredis", f.raw_redis.hiredis_put_ms / f.redis_put_ms);
    json.Add("redis_get_" + k + "_vs_raw_hiredis",
             f.raw_redis.hiredis_get_ms / f.redis_get_placed_ms);
    json.Add("tcp_put_" + k + "_framed_gbps", gb / (f.tcp_put_ms[1] / 1e3));
    json.Add("tcp_get_" + k + "_framed_gbps", gb / (f.tcp_get_ms[1] / 1e3));
    json.Add("tcp_put_" + k + "_framed_vs_whole", f.tcp_put_ms[0] / f.tcp_put_ms[1]);
    json.Add("tcp_get_" + k + "_framed_vs_whole", f.tcp_get_ms[0] / f.tcp_get_ms[1]);
    json.Add("tcp_get_" + k + "_vs_zmq_stream", f.tcp_get_vs_zmq);
    json.Add("hit_path_" + k + "_us_per_token", f.hit_ms * 1e3 / tokens);
    json.Add("h100_recompute_us_per_token", recompute_us_per_token);
  }
  t.Print();
  std::cout << "H100 recompute estimate: 2 x " << params << " FLOPs/token / " << h100_flops
            << " FLOP/s = " << Fixed(recompute_us_per_token, 1) << " us/token\n";
  if (fill_chunks > 0) ReportFill(fill_chunks, controller.endpoint, store_threads, json);
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
  int fill_chunks = 7;
  app.add_option("--fill-chunks", fill_chunks,
                 "512 MiB chunks per configuration of the fill run (0: no fill run)")
      ->check(CLI::Range(0, 7))
      ->capture_default_str();
  std::vector<std::string> serve;
  app.add_option("--serve-zmq", serve, "(internal) run the bare ZeroMQ server on these endpoints");
  CLI11_PARSE(app, argc, argv);
  if (!serve.empty()) return pikv::bench::ServeBareZmq(serve);
  try {
    return pikv::bench::Run(repeats, sizes, stream_frame, store_threads, fill_chunks);
  } catch (const std::exception& e) {
    std::cerr << "big_chunk_bench: " << e.what() << "\n";
    return 1;
  }
}
