// peer_data_client: one client process of bench/peers, for the systems
// driven from C++ (a pikv-node over its wire, redis-server over a bare RESP client).
// bench/peers/mooncake_client.py is its twin for Mooncake Store; both take
// the same flags and print the same JSON, so peers_bench.py can run, time
// and pin every system's clients alike.
//
//   peer_data_client --system pikv|pikv-local|pikv-pull|redis --endpoint E --op load|put|get
//       --size BYTES --objects K [--first I] [--batch B] [--seconds S]
//       [--seed N] [--from PEER] [--slice N] [--zipf THETA] [--sync]
//
// pikv-local: E is the node's ipc endpoint; a put writes each object into
// reserved arena space over its zero-copy channel and commits it there; a
// get leases what is in its CPU tier over that channel, gets the rest over
// ipc, and copies each object once into this process's memory
// (PikvLocalStore).
// pikv-pull: a get is a P2P pull by the node at E from its peer at --from
// (NodeClient::PullHere: the node fetches the objects into its CPU tier,
// where an engine beside it reads them in place); after each call, untimed,
// the node deletes them, so the next pull crosses again. Its clients get
// disjoint objects (--slice: gets pick among objects first..first+N-1), so
// no client deletes what another has just pulled.
//
// Object i of a run is MakeObject(seed * 1000003 + i, size) for every
// client and system: a sealed pikv object of `size` bytes (Redis stores the
// same bytes under the key's hex). `load` stores objects 0..K-1 once, untimed; `put` cycles
// through them from `first` (K is chosen larger than the server's memory, so
// each put really stores); `get` reads random ones of them (uniformly, or by
// --zipf: bench/peers/key_mix.h), B per call. The
// last line is {"ok", "failed", "bytes", "seconds", "cpu_seconds",
// "latencies_us": [...]}; a failed call adds no bytes and no latency. cpu_seconds is
// this process's (all its threads') over the timed loop alone. --sync: print
// "ready" once set up and start the clock on a line from stdin, so a run's
// clients start together and set-up is outside the servers' CPU account.
#include <hiredis/hiredis.h>
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>

#include "../../storage/src/resp_io.h"
#include "client_result.h"
#include "key_mix.h"
#include "pikv/proto/chunk_object.h"
#include "pikv/rpc/node_client.h"
#include "pikv/rpc/zero_copy_client.h"
#include "pikv/transport/local_channel.h"
#include "test_support.h"

namespace pikv::bench {
namespace {

using testing::MakeObject;
using testing::TestObject;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string system, endpoint, op, from;
  uint64_t size = 1 << 20;
  size_t objects = 8, first = 0, batch = 1, slice = 0;
  uint64_t seed = 0;
  double seconds = 1;
  double zipf = 0;  // > 0: gets draw objects by Zipf(zipf) (key_mix.h)
  bool sync = false;
};

// One call of `batch` objects; true when every object went (or came back
// whole).
class Store {
 public:
  virtual ~Store() = default;
  virtual bool Put(std::span<const TestObject* const> objects) = 0;
  virtual bool Get(std::span<const TestObject* const> objects) = 0;
  // Undoes what a Get left behind, outside the timed span.
  virtual void AfterGet(std::span<const TestObject* const> /*objects*/) {}
};

class PikvStore : public Store {
 public:
  explicit PikvStore(const std::string& endpoint) : node_(endpoint, std::chrono::seconds(60)) {
    // Objects over a MiB travel in frames of one, as pikv's client sends
    // them (client::ClientOptions::stream_frame).
    node_.set_stream_frame(1 << 20);
  }
  bool Put(std::span<const TestObject* const> objects) override {
    std::vector<ChunkKey> keys;
    std::vector<SharedBuffer> bytes;
    for (const TestObject* o : objects) keys.push_back(o->key), bytes.push_back(o->bytes);
    auto r = node_.Put(keys, bytes);
    if (!r.ok()) return false;
    for (const Status& s : *r)
      if (!s.ok()) return false;
    return true;
  }
  bool Get(std::span<const TestObject* const> objects) override {
    std::vector<ChunkKey> keys;
    for (const TestObject* o : objects) keys.push_back(o->key);
    auto r = node_.Get(keys);
    if (!r.ok()) return false;
    for (size_t i = 0; i < objects.size(); ++i)
      if (!(*r)[i].ok() || (*r)[i]->size() != objects[i]->bytes.size()) return false;
    return true;
  }

 protected:
  rpc::NodeClient& node() { return node_; }

 private:
  rpc::NodeClient node_;
};

// pikv's best path on one host, as its client (client::Client) takes it:
// what the node's CPU tier holds is leased in place over the zero-copy
// channel; the rest comes over ipc (a disk hit, promoted by the node) and is
// checksummed, as the client checks whatever did not come in place. Each
// object is then copied once into the reader's own memory, where an engine
// would remap it into its cache.
class PikvLocalStore : public PikvStore {
 public:
  explicit PikvLocalStore(const std::string& ipc) : PikvStore(ipc) {
    auto zc = rpc::ZeroCopyClient::Connect(ZeroCopySocketFor(ipc), std::chrono::seconds(10));
    if (!zc.ok()) throw std::runtime_error("zero-copy channel: " + zc.status().ToString());
    zero_copy_ = *zc;
  }
  // As client::Client stores an object on its host, a batch at a time:
  // each object written straight into reserved arena space (the payload
  // copied in, its written marks sent as it goes, so the node hashes behind
  // the writer), then committed for the node to seal and admit without a
  // copy; the batch reserves and commits in one round trip each. Objects
  // the arena has no room for (its objects held by the disk queue, or past
  // this client's share of it) take a copying put over ipc instead, which
  // the node may still write to disk.
  bool Put(std::span<const TestObject* const> objects) override {
    std::vector<uint64_t> sizes;
    for (const TestObject* o : objects) sizes.push_back(o->bytes.size());
    auto spaces = zero_copy_->ReserveMany(sizes, std::chrono::seconds(10));
    if (!spaces.ok()) return PikvStore::Put(objects);
    std::vector<ChunkKey> keys;
    std::vector<rpc::ZeroCopyClient::Space> filled;
    for (size_t i = 0; i < objects.size(); ++i) {
      const TestObject* o = objects[i];
      auto& space = (*spaces)[i];
      if (!space.ok()) {
        if (!PikvStore::Put(objects.subspan(i, 1))) return false;
        continue;
      }
      auto header = ParseChunkHeader(o->bytes.span());
      if (!header.ok()) return false;
      const auto payload = o->bytes.span().subspan(ChunkHeaderSize(*header));
      if (!BuildChunkObjectInto(*header, payload, space->bytes(), /*checksum=*/false,
                                [&](size_t n) { space->Written(n); })
               .ok())
        return false;
      keys.push_back(o->key);
      filled.push_back(std::move(*space));
    }
    auto committed =
        zero_copy_->CommitMany(keys, std::move(filled), std::chrono::seconds(10), /*seal=*/true);
    if (!committed.ok()) return false;
    return std::all_of(committed->begin(), committed->end(),
                       [](const Status& s) { return s.ok(); });
  }
  bool Get(std::span<const TestObject* const> objects) override {
    std::vector<ChunkKey> keys;
    for (const TestObject* o : objects) keys.push_back(o->key);
    auto leased = zero_copy_->Lease(keys, std::chrono::seconds(10));
    if (!leased.ok()) return false;
    std::vector<const TestObject*> rest;
    for (size_t i = 0; i < objects.size(); ++i) {
      if (!leased->objects[i].ok())
        rest.push_back(objects[i]);
      else if (!Take(*leased->objects[i], *objects[i], /*checksum=*/false))
        return false;
    }
    // Read in time, or the node may have reused the memory meanwhile.
    if (rest.size() < keys.size() && rpc::ZeroCopyClient::Clock::now() >= leased->deadline)
      return false;
    if (rest.empty()) return true;
    std::vector<ChunkKey> rest_keys;
    for (const TestObject* o : rest) rest_keys.push_back(o->key);
    auto fetched = node().Get(rest_keys);
    if (!fetched.ok() || fetched->size() != rest.size()) return false;
    for (size_t i = 0; i < rest.size(); ++i)
      if (!(*fetched)[i].ok() || !Take(*(*fetched)[i], *rest[i], /*checksum=*/true)) return false;
    return true;
  }

 private:
  // Checks that `object` is `expected` (its size, its header's key; with
  // `checksum`, its payload's hash too), as client::Client checks what it
  // fetched, then copies it into the reader's memory.
  bool Take(const SharedBuffer& object, const TestObject& expected, bool checksum) {
    const size_t size = expected.bytes.size();
    if (object.size() != size) return false;
    if (checksum) {
      if (!VerifyChunkObject(object.span(), &expected.key).ok()) return false;
    } else if (auto header = ParseChunkHeader(object.span());
               !header.ok() || header->key != expected.key) {
      return false;
    }
    if (into_.size() < size) into_.assign(size, 0);
    std::memcpy(into_.data(), object.data(), size);
    return true;
  }
  std::shared_ptr<rpc::ZeroCopyClient> zero_copy_;
  std::vector<uint8_t> into_;
};

class PikvPullStore : public Store {
 public:
  PikvPullStore(const std::string& endpoint, std::string from)
      : node_(endpoint, std::chrono::seconds(60)), from_(std::move(from)) {}
  bool Put(std::span<const TestObject* const>) override { return false; }
  bool Get(std::span<const TestObject* const> objects) override {
    auto r = node_.PullHere(Keys(objects), from_, std::chrono::seconds(60));
    if (!r.ok()) return false;
    for (const Status& s : *r)
      if (!s.ok()) return false;
    return true;
  }
  void AfterGet(std::span<const TestObject* const> objects) override {
    (void)node_.Delete(Keys(objects));
  }

 private:
  static std::vector<ChunkKey> Keys(std::span<const TestObject* const> objects) {
    std::vector<ChunkKey> keys;
    for (const TestObject* o : objects) keys.push_back(o->key);
    return keys;
  }
  rpc::NodeClient node_;
  std::string from_;
};

// Redis through the least a client can do: each command written from the
// object's own memory in one writev, replies read straight into memory of
// their own, a batch pipelined (storage/src/resp_io.h, what pikv's Redis
// tier uses). hiredis costs several times that on large values
// (big_chunk_bench's raw hiredis rows).
class RedisStore : public Store {
 public:
  explicit RedisStore(const std::string& endpoint) {
    const auto colon = endpoint.rfind(':');
    c_.reset(colon == std::string::npos ? redisConnectUnix(endpoint.c_str())
                                        : redisConnect(endpoint.substr(0, colon).c_str(),
                                                       std::stoi(endpoint.substr(colon + 1))));
    if (!c_ || c_->err) throw std::runtime_error("cannot connect to redis at " + endpoint);
  }
  bool Put(std::span<const TestObject* const> objects) override {
    for (const TestObject* o : objects) {
      const std::string key = o->key.Hex();
      const std::string_view set[] = {
          "SET", key, {reinterpret_cast<const char*>(o->bytes.data()), o->bytes.size()}};
      if (!storage::resp::WriteCommand(c_->fd, set).ok()) return false;
    }
    storage::resp::Reader replies(c_->fd);
    bool ok = true;
    for (size_t i = 0; i < objects.size(); ++i) {
      auto r = replies.ReadStatus();
      if (!r.ok()) return false;
      ok = ok && r->kind == storage::resp::BulkReply::Kind::kStatus;
    }
    return ok;
  }
  bool Get(std::span<const TestObject* const> objects) override {
    for (const TestObject* o : objects) {
      const std::string key = o->key.Hex();
      const std::string_view get[] = {"GET", key};
      if (!storage::resp::WriteCommand(c_->fd, get).ok()) return false;
    }
    storage::resp::Reader replies(c_->fd);
    bool ok = true;
    for (const TestObject* o : objects) {
      auto r = replies.ReadBulk(uint64_t{1} << 31);
      if (!r.ok()) return false;
      ok = ok && r->kind == storage::resp::BulkReply::Kind::kValue &&
           r->value.size() == o->bytes.size();
    }
    return ok;
  }

 private:
  std::unique_ptr<redisContext, decltype(&redisFree)> c_{nullptr, redisFree};
};

int Run(const Options& o) {
  // Keep large receive buffers in the heap, as pikv-node does: no system's
  // figures include mmap and page-fault churn on the client.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::unique_ptr<Store> store;
  if (o.system == "pikv")
    store = std::make_unique<PikvStore>(o.endpoint);
  else if (o.system == "pikv-local")
    store = std::make_unique<PikvLocalStore>(o.endpoint);
  else if (o.system == "pikv-pull")
    store = std::make_unique<PikvPullStore>(o.endpoint, o.from);
  else
    store = std::make_unique<RedisStore>(o.endpoint);
  std::vector<TestObject> objects;
  for (size_t i = 0; i < o.objects; ++i)
    objects.push_back(MakeObject(o.seed * 1000003 + i, o.size));

  ClientResult r;
  std::mt19937_64 rng(o.first + 1);
  std::vector<const TestObject*> call(o.batch);
  size_t next = o.first;
  // One get untimed first: a client's receive buffers are made on its
  // first call (pikv's are reused after), as a Mooncake client's registered
  // buffer is made at set-up. Of its own first object: pull clients must not
  // pull (and delete) the same object at once. Its outcome is not counted.
  if (o.op == "get") {
    for (auto& obj : call) obj = &objects[o.first % objects.size()];
    (void)store->Get(call);
    store->AfterGet(call);
  }
  const ZipfKeys zipf(o.zipf > 0 ? objects.size() : 0, o.zipf);
  if (o.sync) WaitForGo();
  const double cpu_start = CpuSeconds();
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(o.seconds);
  const bool load = o.op == "load";
  Clock::duration untimed{};
  while (load ? next < o.first + o.objects : Clock::now() - untimed < end || r.ok + r.failed == 0) {
    for (auto& obj : call) {
      obj = o.op != "get"  ? &objects[next++ % objects.size()]
            : o.zipf > 0   ? &objects[zipf(rng)]
            : o.slice == 0 ? &objects[rng() % objects.size()]
                           : &objects[(o.first + rng() % o.slice) % objects.size()];
    }
    const auto t0 = Clock::now();
    const bool done = o.op == "get" ? store->Get(call) : store->Put(call);
    if (!done) {
      r.failed += call.size();
      continue;
    }
    r.latencies_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    r.ok += call.size();
    for (const TestObject* obj : call) r.bytes += obj->bytes.size();
    const auto undo = Clock::now();
    if (o.op == "get") store->AfterGet(call);
    untimed += Clock::now() - undo;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start - untimed).count();
  r.cpu_seconds = CpuSeconds() - cpu_start;
  r.Print();
  return r.failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  CLI::App app{"One client of bench/peers for pikv-node or redis-server"};
  pikv::bench::Options o;
  app.add_option("--system", o.system)
      ->required()
      ->check(CLI::IsMember({"pikv", "pikv-local", "pikv-pull", "redis"}));
  app.add_option("--endpoint", o.endpoint,
                 "pikv: tcp:// or ipc://; redis: host:port or a unix path")
      ->required();
  app.add_option("--op", o.op)->required()->check(CLI::IsMember({"load", "put", "get"}));
  app.add_option("--size", o.size, "Bytes per object")->check(CLI::Range(4096ull, 1ull << 30));
  app.add_option("--objects", o.objects, "Objects in the run's key space")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--first", o.first, "Where this client's put stream starts");
  app.add_option("--batch", o.batch, "Objects per call")->check(CLI::Range(1, 1024));
  app.add_option("--seconds", o.seconds, "Timed seconds (put, get)");
  app.add_option("--seed", o.seed, "Which key space (objects differ by seed)");
  app.add_option("--slice", o.slice, "Gets pick among objects first..first+slice-1 (0: all)");
  app.add_option("--zipf", o.zipf, "Gets draw objects by Zipf(THETA) (0: uniformly)")
      ->check(CLI::Range(0.0, 4.0));
  app.add_option("--from", o.from, "pikv-pull: the peer's tcp endpoint to pull from");
  app.add_flag("--sync", o.sync, "Print ready, start on a line from stdin");
  CLI11_PARSE(app, argc, argv);
  try {
    return pikv::bench::Run(o);
  } catch (const std::exception& e) {
    std::cerr << "peer_data_client: " << e.what() << "\n";
    return 2;
  }
}
