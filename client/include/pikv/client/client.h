// pikv::client::Client: what an inference engine links.
//
//   prompt -> Plan (keys, a source per chunk, attention metadata)
//          -> Fetch (the hits' chunk objects) -> Remap (into the paged cache)
//   misses -> the engine computes them at virtual positions -> Store.
//
// Plan asks the local node once (batched exists) and the controller once
// (locate) for the rest, and gives each chunk a source, in order of cost:
// kLocal (this host's node has it in CPU or disk), kPeer (another live node
// has it in CPU or disk: fetched P2P through the local node, which keeps a
// copy), kRemote (the remote tier, Redis, through the local node), kMiss.
// Zero copy on the local host: when the local node is reached over ipc, the
// client also opens the node's zero-copy channel (rpc/zero_copy_client.h).
// Then Fetch returns the local node's CPU-resident objects as leased views
// into its arena (no byte copied; the node verified them on admission), and
// Remap reads straight from there; stores are written (gathered) straight
// into space reserved in the arena and committed, verified by the node. A
// lease has a deadline (ChunkPlan::lease_deadline): Remap refuses a view
// past it, and reports a remap that outlived it as failed, because the node
// may have reused the memory. Without the channel, everything is copied
// over ZeroMQ as before.
// Every call has a deadline and degrades instead of failing: controller down
// -> a local-only plan; local node down -> peers are fetched directly, the
// rest are misses; a peer that dies mid-pull -> misses; a corrupt object -> a
// miss. The engine always gets an answer it can act on: recompute the misses.
//
// Exactness: reused chunks give the same logits as the mode's reference
// (to float rounding; shared/DESIGN.md §4). In `isolated` mode that is
// recomputing each chunk alone; in `prefixed` mode a chunk was computed
// right after the system prompt (its key includes the system prompt's) and
// is re-rotated to wherever it sits, at any distance from it.
// Thread-safety: a Client is used by one thread at a time (its sockets are
// not shared); create one per engine thread.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "pikv/client/audit_rule.h"
#include "pikv/client/client_stats.h"
#include "pikv/client/distance_buckets.h"
#include "pikv/client/prompt.h"
#include "pikv/device/attention_metadata.h"
#include "pikv/device/remap.h"
#include "pikv/proto/chunk_key.h"
#include "pikv/proto/chunk_object.h"
#include "pikv/proto/shared_buffer.h"
#include "pikv/rpc/zero_copy_client.h"
#include "pikv/transport/controller_finder.h"
#include "pikv/transport/curve.h"

namespace pikv::client {

class BackgroundStores;
class Channels;

struct ClientOptions {
  std::string local_node;  // this host's node (ipc:// or tcp://); empty = none
  std::string controller;  // empty = no controller (local-only plans)
  // How `controller` becomes the finder the client follows: listed specs by
  // default; a program that links coord passes coord::FindControllers for
  // etcd:// specs (the library itself links no etcd code).
  FindControllersFn find_controllers = &ControllerFinder::Parse;
  std::string host;  // this host's name, for locate's ranking
  // The namespace: everything the KV depends on besides the tokens.
  std::string model_id;
  DType dtype = DType::kBF16;
  KvFormat kv_format = KvFormat::kStandard;  // MLA: one latent row per token
  uint32_t num_layers = 0, num_kv_heads = 0, head_dim = 0;
  device::RopePlan rope;  // per layer where the model's layers differ
  // Layers that attend over a sliding window or a chunk (from model-config):
  // an engine that keeps only the window there cannot take a whole chunk.
  std::vector<uint32_t> windowed_layers;
  AttentionMode mode = AttentionMode::kIsolated;
  // Prefixed mode: the distance from the system prompt each document is
  // computed and stored at (distance_buckets.h); none: right after it.
  DistanceBuckets distance_buckets;
  // This engine's tenant (proto/owner.h; "" = the default one), part of the
  // namespace: with security on it must be the tenant the keyring gives the
  // engine's key, or the nodes refuse its stores and its keys never hit.
  std::string tenant;
  // The share of hits to audit (0..1, audit_rule.h): the engine recomputes a
  // sampled hit and Audit compares; a mismatch is reported to the controller.
  double audit_rate = 0;
  bool zero_copy = true;  // use the local node's zero-copy channel when it has one
  // Objects over this size cross sockets (a tcp local node, a direct peer
  // fetch, copied stores) in frames of it (message.h); 0 sends them whole.
  uint64_t stream_frame = 1 << 20;
  // Threads that gather a chunk out of the paged cache for a store into the
  // local node's arena (the node seals it; a copied store gathers and hashes
  // on one thread).
  int store_threads = 1;
  // Deadlines.
  std::chrono::milliseconds node_timeout{500};        // exists, get, put on the local node
  std::chrono::milliseconds controller_timeout{200};  // locate, on the Locator's thread
  // The longest a plan waits for the controller's locate: a later answer
  // serves the next plans of those keys (Locator). An engine's scheduler
  // waits on each plan.
  std::chrono::milliseconds locate_budget{4};     // with the local exists, under 5 ms
  std::chrono::milliseconds fetch_timeout{2000};  // a whole Fetch, P2P pulls included
  // CURVE on tcp connections (transport/curve.h): this engine's keys and the
  // cluster's keyring; null: security off. A tcp local node is dialled with
  // the key the keyring lists for local_node_id (an ipc one needs none).
  std::shared_ptr<const CurveSecurity> security;
  std::string local_node_id;
};

// Ok, or why `o.security` cannot dial the local node or the controller (the
// keyring lacks its key, or a tcp local node has no local_node_id).
Status CheckClientSecurity(const ClientOptions& o);

enum class Source { kLocal, kPeer, kRemote, kMiss };
std::string_view SourceName(Source s);
std::optional<Source> ParseSource(std::string_view name);

// A chunk's source as a plan made elsewhere decided it (PlanFrom).
struct PlannedSource {
  Source source = Source::kMiss;
  std::string peer_id, peer_endpoint;  // for kPeer
  bool adjacent = false;               // ChunkPlan::adjacent
};

// What a chunk's key depends on beyond its tokens and the client's own
// namespace (KeyNamespace): the system prompt before it (prefixed mode
// only) and the request's scope.
struct KeyContext {
  std::optional<ChunkKey> sys_key;
  std::optional<ChunkKey> scope;
};

struct ChunkPlan {
  ChunkKey key;
  // Prefixed mode, chunks after the system prompt: the system prompt's
  // key at the chunk's distance bucket (PrefixKeyAt), part of this chunk's
  // namespace (pass it to Store*).
  std::optional<ChunkKey> sys_key;
  std::optional<ChunkKey> scope;  // the prompt's (ChunkedPrompt::scope)
  KeyContext context() const { return {sys_key, scope}; }
  uint32_t segment = 0;  // index into the prompt's segments (0 = system prompt)
  Source source = Source::kMiss;
  std::string peer_id, peer_endpoint;  // for kPeer
  int64_t actual_start = 0;            // position of its first token in this prompt
  // The position its K is rotated to (Remap): actual_start, but for the
  // system prompt of a prompt computed at a distance (ChunkedPrompt::
  // distance), which is encoded that far back.
  int64_t encoded_start = 0;
  // Planned from its adjacent copy (bucket 0) because its distance
  // bucket's was found nowhere (ChunkedPrompt::adjacent_fallback): key and
  // sys_key are that copy's.
  bool adjacent = false;
  // Set by Fetch when the object is a view into the local node's memory:
  // it is the chunk's object until then, and Remap refuses it afterwards.
  std::chrono::steady_clock::time_point lease_deadline{};
};

struct Plan {
  std::vector<ChunkPlan> chunks;  // one per segment before the question
  device::AttentionMetadata metadata;
  bool local_node_answered = false;
  bool controller_answered = false;
};

class Client {
 public:
  explicit Client(ClientOptions options);
  ~Client();

  const ClientOptions& options() const { return options_; }
  // The key of a chunk's tokens in this client's namespace (the context's
  // sys_key only matters in prefixed mode).
  ChunkKey KeyOf(std::span<const int32_t> tokens, const KeyContext& context = {}) const;

  Plan MakePlan(const ChunkedPrompt& prompt);
  // The prompt's chunks keyed and placed as MakePlan would, every source
  // kMiss: asks nobody (what a router scores, or a key computed elsewhere).
  Plan PlanKeys(const ChunkedPrompt& prompt) const;
  // The plan of `prompt` with each chunk's source as another process's
  // MakePlan decided it (an engine's scheduler plans; its worker fetches):
  // keys and positions computed here, nobody asked; `local_node_answered`
  // is that plan's (Fetch goes to the peers directly when it is false).
  // kInvalidArgument when `sources` does not fit the prompt's chunks.
  Result<Plan> PlanFrom(const ChunkedPrompt& prompt, std::span<const PlannedSource> sources,
                        bool local_node_answered);
  // Objects for the plan's chunks, in plan order; misses are kNotFound. Peer
  // hits are pulled through the local node (or directly if it is down).
  std::vector<Result<SharedBuffer>> Fetch(Plan& plan);
  // Writes a fetched object into the engine's cache at the chunk's position.
  Status Remap(const SharedBuffer& object, const ChunkPlan& chunk, std::span<const int64_t> slots,
               const device::PagedLayout& cache, int threads = 1);
  // For a remap on the engine's device (pikv.device): every check Remap
  // makes (the lease, the object against this namespace and the chunk's key,
  // the placement against the cache's geometry), and the rotations it would
  // apply. Nothing is written. A leased object must be copied off before
  // LeaseHeld turns false, and checked again after the copy.
  Result<device::RemapTables> PrepareRemap(const SharedBuffer& object, const ChunkPlan& chunk,
                                           std::span<const int64_t> slots,
                                           const device::PagedLayout& cache);
  bool LeaseHeld(const ChunkPlan& chunk) const;
  // The local node's arena as leased objects are mapped (kept mapped while
  // the result lives), for a device to register; none without a zero-copy
  // channel.
  std::optional<rpc::ZeroCopyClient::Arena> ZeroCopyArena();
  // Stores a computed chunk: payload [layer][k|v][token][head][dim] in the
  // namespace's dtype, K rotated at `virtual_start`. The built chunk object
  // goes to `object` when given (even if the node is unreachable), so the
  // engine can remap what it just computed.
  // `key` must be KeyOf(tokens, context) (the node refuses an object whose
  // key is not the hash of its own namespace and tokens).
  Status Store(const ChunkKey& key, std::span<const int32_t> tokens, int64_t virtual_start,
               std::span<const uint8_t> payload, SharedBuffer* object = nullptr,
               const KeyContext& context = {});
  // The chunk object Store would store (K rotated at virtual_start, or
  // pre-RoPE), built on the heap and stored nowhere.
  Result<SharedBuffer> BuildObject(const ChunkKey& key, std::span<const int32_t> tokens,
                                   int64_t virtual_start, std::span<const uint8_t> payload,
                                   KForm k_form = KForm::kRotated,
                                   const KeyContext& context = {}) const;

  // Store without waiting: the object is built and put on a background task
  // with its own connection (so it is safe beside this client's calls);
  // `payload` stays alive through its owner until then.
  std::future<Status> StoreAsync(const ChunkKey& key, std::vector<int32_t> tokens,
                                 int64_t virtual_start, SharedBuffer payload,
                                 const KeyContext& context = {});

  // Stores a chunk the engine computed on its own (its tokens at positions
  // virtual_start.., K rotated as the engine rotates it) straight out of the
  // engine's paged cache: gathered by `slots` into a chunk object (the one
  // copy), then put on the local node. The gather is done when this returns,
  // so the engine may reuse the blocks; with `async` the put runs on a task of
  // its own (its own connection) and the future says how it went. The layout
  // must match this client's namespace (dtype, format, heads, head dim, layers).
  // `key` is the chunk's key (KeyOf; in prefixed mode with the system
  // prompt's key), as for Store.
  // Stores a chunk whose payload `write` puts straight into the object's
  // payload bytes (payload_size of them, this namespace's geometry): in the
  // local node's arena when it lends one, else a buffer that is put by copy.
  // An engine copies from its device this way with no host copy between.
  // `write` runs before this returns; with `async` the put may not have.
  using PayloadWriter = std::function<Status(std::span<uint8_t> payload)>;
  std::future<Status> StoreWritten(const ChunkKey& key, std::span<const int32_t> tokens,
                                   int64_t virtual_start, size_t payload_size,
                                   const PayloadWriter& write, bool async,
                                   const KeyContext& context = {});

  std::future<Status> StoreFromCache(const ChunkKey& key, std::span<const int32_t> tokens,
                                     const device::PagedLayout& cache,
                                     std::span<const int64_t> slots, int64_t virtual_start,
                                     bool async = false, const KeyContext& context = {});

  // Whether to audit this hit: true for an audit_rate share of calls.
  bool ShouldAudit();
  // Audits a fetched hit: `fetched` must be `chunk`'s object and
  // `recomputed` its payload as the engine computes it alone, K in `form`
  // (rotated at 0.. by default; CompareWithRecomputed brings the two to one
  // form). A mismatch is reported to the controller, which drops the key on
  // every node (then an honest store of it lands); `reported` says whether
  // that report was taken. A finding not comparable is not a match (do not
  // use the object) and is not reported.
  struct Audited {
    AuditFinding finding;
    bool reported = false;
  };
  Result<Audited> Audit(const SharedBuffer& fetched, const ChunkPlan& chunk,
                        std::span<const uint8_t> recomputed, RecomputedForm form = {});

  ClientStats Stats() const;
  // Whether a paged cache is this client's namespace (dtype, format, heads,
  // head dim, layers) and its strides are sound.
  Status CheckLayout(const device::PagedLayout& cache) const;

 private:
  KeyNamespace Namespace(const KeyContext& context) const;
  Status Put(const ChunkKey& key, const SharedBuffer& object);
  // The namespace a stored chunk's key was made in (this client's, after
  // `context`); InvalidArgument when `key` is not KeyOf(tokens, context).
  Result<KeyNamespace> NamespaceOfKey(const ChunkKey& key, std::span<const int32_t> tokens,
                                      const KeyContext& context) const;
  // The object of header `h` over `payload`, built on the heap.
  static Result<SharedBuffer> ObjectOf(const ChunkHeader& h, std::span<const uint8_t> payload);
  // The object header of a chunk this client stores.
  ChunkHeader MakeHeader(const ChunkKey& key, const KeyNamespace& ns,
                         std::span<const int32_t> tokens, int64_t virtual_start) const;
  // InvalidArgument unless `object` is `chunk`'s, in this client's namespace
  // and geometry (checked before anything is remapped from it; auditor.cc).
  Status CheckIsChunk(std::span<const uint8_t> object, const ChunkPlan& chunk) const;
  // Stores an object of `size` bytes that `fill` writes: into space reserved
  // in the local node's arena when the zero-copy channel is up (committed
  // in the background with `async`), else into a heap buffer put by copy.
  // fill(bytes, checksum): with checksum false the object is left unsealed
  // (payload checksum 0) for the node to seal on commit, which saves the
  // writer a pass over the bytes (the node hashes them anyway).
  // Writes the object into the buffer; `written` hears of its progress.
  using Fill = std::function<Status(std::span<uint8_t>, bool checksum, const WrittenFn& written)>;
  std::future<Status> StoreObject(const ChunkKey& key, size_t size, const Fill& fill, bool async);
  // Leases plan chunks `idx` in place from the local node (out[i], their
  // lease deadlines, in_place[i]); returns those it could not (fetch them
  // by copy).
  std::vector<size_t> LeaseInPlace(Plan& plan, const std::vector<size_t>& idx,
                                   std::chrono::steady_clock::time_point deadline,
                                   std::vector<Result<SharedBuffer>>& out,
                                   std::vector<bool>& in_place);

  ClientOptions options_;
  // The local node, controller, peers and zero-copy channel (channels.h);
  // after options_, which it reads.
  std::unique_ptr<Channels> channels_;
  ClientStats stats_;
  std::mt19937_64 audit_rng_{std::random_device{}()};
  // Stores handed off (async): last, so they end before the rest goes.
  std::unique_ptr<BackgroundStores> background_;
};

}  // namespace pikv::client
