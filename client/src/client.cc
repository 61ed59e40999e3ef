#include "pikv/client/client.h"

#include <map>

#include "channels.h"
#include "pikv/client/background_stores.h"
#include "pikv/proto/checksum.h"
#include "pikv/proto/chunk_object.h"
#include "planner.h"

namespace pikv::client {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds Left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// Each fetched object: kept if it is the chunk's (misses and corrupt
// objects become kNotFound) and counted.
void CheckFetched(Plan& plan, std::vector<Result<SharedBuffer>>& out,
                  const std::vector<bool>& in_place, ClientStats& stats) {
  for (size_t i = 0; i < out.size(); ++i) {
    ChunkPlan& c = plan.chunks[i];
    if (!out[i].ok()) {
      if (c.source != Source::kMiss) stats.fetch_misses++;
      out[i] = NotFound();
      continue;
    }
    // Whatever crossed a network is checked before an engine trusts it. An
    // object lent in place was verified by the node when it was admitted and
    // cannot be changed since: its header must still name the chunk.
    const std::span<const uint8_t> bytes = out[i]->span();
    auto header = ParseChunkHeader(bytes);
    if (!header.ok() || header->key != c.key ||
        (!in_place[i] &&
         PayloadChecksum(ChunkPayload(bytes, *header)) != header->payload_checksum)) {
      stats.corrupt++;
      out[i] = NotFound("corrupt object");
      c.lease_deadline = {};
      continue;
    }
    stats.fetched++;
    if (in_place[i]) stats.zero_copy_fetched++;
  }
}

}  // namespace

Client::Client(ClientOptions options)
    : options_(std::move(options)),
      channels_(std::make_unique<Channels>(options_)),
      background_(std::make_unique<BackgroundStores>()) {}

Client::~Client() = default;

ClientStats Client::Stats() const {
  ClientStats s = stats_;
  s.stores_ran_inline = background_->ran_inline();
  return s;
}

KeyNamespace Client::Namespace(const KeyContext& context) const {
  KeyNamespace ns{options_.model_id,         options_.kv_format, options_.dtype,
                  options_.rope.Signature(), options_.mode,      {},
                  options_.tenant,           context.scope};
  if (options_.mode == AttentionMode::kPrefixed) ns.sys_key = context.sys_key;
  return ns;
}

ChunkKey Client::KeyOf(std::span<const int32_t> tokens, const KeyContext& context) const {
  return MakeChunkKey(Namespace(context), tokens);
}

Plan Client::MakePlan(const ChunkedPrompt& prompt) {
  return BuildPlan(prompt, *this, *channels_, stats_);
}

Plan Client::PlanKeys(const ChunkedPrompt& prompt) const { return client::PlanKeys(prompt, *this); }

Result<Plan> Client::PlanFrom(const ChunkedPrompt& prompt, std::span<const PlannedSource> sources,
                              bool local_node_answered) {
  auto plan = PlanFromSources(prompt, *this, sources);
  if (plan.ok()) plan->local_node_answered = local_node_answered;
  return plan;
}

std::vector<Result<SharedBuffer>> Client::Fetch(Plan& plan) {
  const auto deadline = Clock::now() + options_.fetch_timeout;
  std::vector<Result<SharedBuffer>> out(plan.chunks.size(), Result<SharedBuffer>(NotFound()));
  auto take = [&](const std::vector<size_t>& idx, Result<std::vector<Result<SharedBuffer>>> got) {
    if (!got.ok()) return;
    for (size_t j = 0; j < idx.size() && j < got->size(); ++j) out[idx[j]] = std::move((*got)[j]);
  };
  // Local and remote-tier chunks: one get on the local node.
  std::vector<size_t> here;
  std::map<std::string, std::vector<size_t>> by_peer;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ChunkPlan& c = plan.chunks[i];
    if (c.source == Source::kLocal || c.source == Source::kRemote) here.push_back(i);
    if (c.source == Source::kPeer) by_peer[c.peer_endpoint].push_back(i);
  }
  auto keys_of = [&](const std::vector<size_t>& idx) {
    std::vector<ChunkKey> k;
    for (size_t i : idx) k.push_back(plan.chunks[i].key);
    return k;
  };
  rpc::NodeClient* local = channels_->local();
  bool local_up = local && plan.local_node_answered;
  // In place from the local node's arena what is in its CPU tier; the rest
  // (disk, Redis, or no channel) by copy.
  std::vector<bool> in_place(plan.chunks.size(), false);
  if (local_up) here = LeaseInPlace(plan, here, deadline, out, in_place);
  if (local_up && !here.empty()) {
    local->set_timeout(Left(deadline));
    auto got = local->Get(keys_of(here));
    if (!got.ok()) local_up = false;
    take(here, std::move(got));
  }
  // Peer chunks: pulled through the local node (which keeps a copy), or
  // fetched directly when the local node is down.
  for (const auto& [endpoint, idx] : by_peer) {
    if (local_up) {
      const auto left = Left(deadline);
      local->set_timeout(left);
      // The node's own pull must give up before our deadline does.
      const auto pull_timeout = std::max(std::chrono::milliseconds(1), left * 8 / 10);
      if (channels_->ZeroCopy()) {
        // Admitted there, then read in place: the bytes never cross the socket.
        auto pulled = local->PullHere(keys_of(idx), endpoint, pull_timeout);
        std::vector<size_t> admitted;
        for (size_t j = 0; pulled.ok() && j < idx.size() && j < pulled->size(); ++j) {
          if ((*pulled)[j].ok()) admitted.push_back(idx[j]);
        }
        // What did not land in its CPU tier (no room) is read by copy.
        auto rest = LeaseInPlace(plan, admitted, deadline, out, in_place);
        if (!rest.empty()) take(rest, local->Get(keys_of(rest)));
        continue;
      }
      take(idx, local->Pull(keys_of(idx), endpoint, pull_timeout));
    } else {
      rpc::NodeClient& peer =
          channels_->Peer(endpoint, plan.chunks[idx.front()].peer_id, Left(deadline));
      peer.set_timeout(Left(deadline));
      stats_.peer_direct += idx.size();
      auto got = peer.Get(keys_of(idx));
      if (!got.ok()) channels_->DropPeer(endpoint);  // reconnect next time
      take(idx, std::move(got));
    }
  }
  CheckFetched(plan, out, in_place, stats_);
  return out;
}

std::vector<size_t> Client::LeaseInPlace(Plan& plan, const std::vector<size_t>& idx,
                                         Clock::time_point deadline,
                                         std::vector<Result<SharedBuffer>>& out,
                                         std::vector<bool>& in_place) {
  auto zc = idx.empty() ? nullptr : channels_->ZeroCopy();
  if (!zc) return idx;
  std::vector<ChunkKey> keys;
  for (size_t i : idx) keys.push_back(plan.chunks[i].key);
  auto leased = zc->Lease(keys, Left(deadline));
  if (!leased.ok()) return idx;
  std::vector<size_t> rest;
  for (size_t j = 0; j < idx.size(); ++j) {
    const size_t i = idx[j];
    if (!leased->objects[j].ok()) {
      rest.push_back(i);
      continue;
    }
    out[i] = std::move(leased->objects[j]);
    plan.chunks[i].lease_deadline = leased->deadline;
    in_place[i] = true;
  }
  return rest;
}

Status Client::Remap(const SharedBuffer& object, const ChunkPlan& chunk,
                     std::span<const int64_t> slots, const device::PagedLayout& cache,
                     int threads) {
  const bool leased = chunk.lease_deadline != Clock::time_point{};
  if (leased && Clock::now() >= chunk.lease_deadline) {
    stats_.lease_expired++;
    return Timeout("the lease on this chunk's object expired; fetch it again or recompute it");
  }
  if (Status ours = CheckIsChunk(object.span(), chunk); !ours.ok()) {
    stats_.corrupt++;
    return ours;
  }
  Status s =
      device::Remap(object.span(), options_.rope, chunk.encoded_start, slots, cache, {threads});
  if (s.ok() && leased && Clock::now() >= chunk.lease_deadline) {
    // The node may have reused the memory while we read it.
    stats_.lease_expired++;
    return Timeout("the lease expired during the remap: recompute the chunk into these slots");
  }
  return s;
}

std::optional<rpc::ZeroCopyClient::Arena> Client::ZeroCopyArena() {
  auto zc = channels_->ZeroCopy();
  if (!zc) return std::nullopt;
  return zc->ReadOnlyArena();
}

bool Client::LeaseHeld(const ChunkPlan& chunk) const {
  return chunk.lease_deadline == Clock::time_point{} || Clock::now() < chunk.lease_deadline;
}

Result<device::RemapTables> Client::PrepareRemap(const SharedBuffer& object, const ChunkPlan& chunk,
                                                 std::span<const int64_t> slots,
                                                 const device::PagedLayout& cache) {
  if (!LeaseHeld(chunk)) {
    stats_.lease_expired++;
    return Timeout("the lease on this chunk's object expired; fetch it again or recompute it");
  }
  if (Status ours = CheckIsChunk(object.span(), chunk); !ours.ok()) {
    stats_.corrupt++;
    return ours;
  }
  if (Status s = CheckLayout(cache); !s.ok()) return s;
  return device::PrepareRemap(object.span(), options_.rope, chunk.encoded_start, slots, cache);
}

Result<KeyNamespace> Client::NamespaceOfKey(const ChunkKey& key, std::span<const int32_t> tokens,
                                            const KeyContext& context) const {
  KeyNamespace ns = Namespace(context);
  if (MakeChunkKey(ns, tokens) != key) {
    return InvalidArgument("key " + key.Hex() +
                           " is not these tokens' key in this client's namespace" +
                           (context.sys_key ? " after that system prompt" : "") +
                           (context.scope ? " in that scope" : ""));
  }
  return ns;
}

Result<SharedBuffer> Client::BuildObject(const ChunkKey& key, std::span<const int32_t> tokens,
                                         int64_t virtual_start, std::span<const uint8_t> payload,
                                         KForm k_form, const KeyContext& context) const {
  auto ns = NamespaceOfKey(key, tokens, context);
  if (!ns.ok()) return ns.status();
  ChunkHeader h = MakeHeader(key, *ns, tokens, virtual_start);
  h.k_form = k_form;
  return ObjectOf(h, payload);
}

Result<SharedBuffer> Client::ObjectOf(const ChunkHeader& h, std::span<const uint8_t> payload) {
  std::vector<uint8_t> bytes(ChunkHeaderSize(h) + payload.size());
  if (Status s = BuildChunkObjectInto(h, payload, bytes); !s.ok()) return s;
  return SharedBuffer::FromVector(std::move(bytes));
}

ChunkHeader Client::MakeHeader(const ChunkKey& key, const KeyNamespace& ns,
                               std::span<const int32_t> tokens, int64_t virtual_start) const {
  ChunkHeader h;
  h.key = key;
  h.model_id = options_.model_id;
  h.geometry = {options_.num_layers,   static_cast<uint32_t>(tokens.size()),
                options_.num_kv_heads, options_.head_dim,
                options_.dtype,        options_.kv_format};
  device::SetHeaderRope(options_.rope, h);
  h.attention_mode = ns.attention_mode;
  h.sys_key = ns.sys_key;
  h.tenant = ns.tenant;
  h.scope = ns.scope;
  h.k_form = KForm::kRotated;
  h.virtual_start = virtual_start;
  h.tokens.assign(tokens.begin(), tokens.end());
  return h;
}

Status Client::Put(const ChunkKey& key, const SharedBuffer& object) {
  if (!channels_->local()) {
    stats_.store_failures++;
    return Unavailable("no local node to store into");
  }
  channels_->local()->set_timeout(options_.node_timeout);
  auto put = channels_->local()->Put({&key, 1}, {&object, 1});
  Status s = put.ok() ? (*put)[0] : put.status();
  if (s.ok()) {
    stats_.stores++;
  } else {
    stats_.store_failures++;
  }
  return s;
}

namespace {

std::future<Status> Ready(Status s) {
  std::promise<Status> p;
  p.set_value(std::move(s));
  return p.get_future();
}

}  // namespace

std::future<Status> Client::StoreWritten(const ChunkKey& key, std::span<const int32_t> tokens,
                                         int64_t virtual_start, size_t payload_size,
                                         const PayloadWriter& write, bool async,
                                         const KeyContext& context) {
  auto fail = [&](Status s) {
    stats_.store_failures++;
    return Ready(std::move(s));
  };
  auto ns = NamespaceOfKey(key, tokens, context);
  if (!ns.ok()) return fail(ns.status());
  const ChunkHeader h = MakeHeader(key, *ns, tokens, virtual_start);
  if (payload_size != h.geometry.PayloadBytes()) {
    return fail(InvalidArgument("a payload of " + std::to_string(payload_size) + " bytes: " +
                                std::to_string(tokens.size()) + " tokens of this namespace hold " +
                                std::to_string(h.geometry.PayloadBytes())));
  }
  const size_t header_size = ChunkHeaderSize(h);
  return StoreObject(
      key, header_size + payload_size,
      [&](std::span<uint8_t> out, bool checksum, const WrittenFn& written) {
        std::span<uint8_t> payload = out.subspan(header_size);
        if (Status s = write(payload); !s.ok()) return s;
        Status s = WriteChunkHeader(h, checksum ? Xxh3(payload) : 0, out);
        if (s.ok() && written) written(out.size());
        return s;
      },
      async);
}

std::future<Status> Client::StoreObject(const ChunkKey& key, size_t size, const Fill& fill,
                                        bool async) {
  auto fail = [&](Status s) {
    stats_.store_failures++;
    return Ready(std::move(s));
  };
  if (auto zc = channels_->ZeroCopy()) {
    // A node whose arena cannot take it may still write it to disk or
    // Redis: then the copying put below is the way.
    if (auto space = zc->Reserve(size, options_.node_timeout); space.ok()) {
      const auto& reserved = *space;
      Status filled = fill(reserved.bytes(), false, [&](size_t n) { reserved.Written(n); });
      if (!filled.ok()) return fail(filled);  // given back
      stats_.zero_copy_stores++;
      if (async) {
        stats_.stores++;  // counted when handed off; the future says whether it landed
        // std::function wants a copyable callable: the reservation is shared.
        auto held = std::make_shared<rpc::ZeroCopyClient::Space>(std::move(*space));
        return background_->Run([zc, key, held, timeout = options_.node_timeout] {
          return zc->Commit(key, std::move(*held), timeout, /*seal=*/true);
        });
      }
      Status s = zc->Commit(key, std::move(*space), options_.node_timeout, /*seal=*/true);
      (s.ok() ? stats_.stores : stats_.store_failures)++;
      return Ready(s);
    }
  }
  std::vector<uint8_t> bytes(size);
  if (Status s = fill(bytes, true, {}); !s.ok()) return fail(s);
  SharedBuffer object = SharedBuffer::FromVector(std::move(bytes));
  if (!async) return Ready(Put(key, object));
  if (options_.local_node.empty()) return fail(Unavailable("no local node to store into"));
  stats_.stores++;  // counted when handed off; the future says whether it landed
  return background_->Run(channels_->PutOnItsOwn(key, std::move(object)));
}

Status Client::Store(const ChunkKey& key, std::span<const int32_t> tokens, int64_t virtual_start,
                     std::span<const uint8_t> payload, SharedBuffer* object_out,
                     const KeyContext& context) {
  auto ns = NamespaceOfKey(key, tokens, context);
  if (!ns.ok()) {
    stats_.store_failures++;
    return ns.status();
  }
  const ChunkHeader h = MakeHeader(key, *ns, tokens, virtual_start);
  const size_t size = ChunkHeaderSize(h) + payload.size();
  if (object_out) {  // the engine keeps the object: built on the heap, put by copy
    auto built = ObjectOf(h, payload);
    if (!built.ok()) {
      stats_.store_failures++;
      return built.status();
    }
    *object_out = std::move(*built);
    return Put(key, *object_out);
  }
  return StoreObject(
             key, size,
             [&](std::span<uint8_t> out, bool checksum, const WrittenFn& written) {
               return BuildChunkObjectInto(h, payload, out, checksum, written);
             },
             false)
      .get();
}

std::future<Status> Client::StoreAsync(const ChunkKey& key, std::vector<int32_t> tokens,
                                       int64_t virtual_start, SharedBuffer payload,
                                       const KeyContext& context) {
  auto ns = NamespaceOfKey(key, tokens, context);
  if (!ns.ok()) {
    stats_.store_failures++;
    return Ready(ns.status());
  }
  const ChunkHeader h = MakeHeader(key, *ns, tokens, virtual_start);
  return StoreObject(
      key, ChunkHeaderSize(h) + payload.size(),
      [&](std::span<uint8_t> out, bool checksum, const WrittenFn& written) {
        return BuildChunkObjectInto(h, payload.span(), out, checksum, written);
      },
      true);
}

Status Client::CheckLayout(const device::PagedLayout& cache) const {
  if (cache.dtype != options_.dtype || cache.kv_format != options_.kv_format ||
      cache.num_kv_heads != options_.num_kv_heads || cache.head_dim != options_.head_dim ||
      cache.layers.size() != options_.num_layers) {
    return InvalidArgument(
        "the cache (" + std::to_string(cache.layers.size()) + " layers, " +
        std::to_string(cache.num_kv_heads) + " heads of " + std::to_string(cache.head_dim) + ", " +
        std::string(DTypeName(cache.dtype)) + ") is not this client's namespace (" +
        std::to_string(options_.num_layers) + " layers, " + std::to_string(options_.num_kv_heads) +
        " heads of " + std::to_string(options_.head_dim) + ", " +
        std::string(DTypeName(options_.dtype)) + ")");
  }
  return cache.Validate();
}

std::future<Status> Client::StoreFromCache(const ChunkKey& key, std::span<const int32_t> tokens,
                                           const device::PagedLayout& cache,
                                           std::span<const int64_t> slots, int64_t virtual_start,
                                           bool async, const KeyContext& context) {
  auto fail = [&](Status s) {
    stats_.store_failures++;
    return Ready(std::move(s));
  };
  if (Status s = CheckLayout(cache); !s.ok()) return fail(s);
  if (slots.size() != tokens.size())
    return fail(InvalidArgument("one slot per token: " + std::to_string(tokens.size()) +
                                " tokens, " + std::to_string(slots.size()) + " slots"));
  auto ns = NamespaceOfKey(key, tokens, context);
  if (!ns.ok()) return fail(ns.status());
  device::GatherSpec spec;
  spec.key = key;
  spec.model_id = options_.model_id;
  spec.tokens.assign(tokens.begin(), tokens.end());
  spec.k_form = KForm::kRotated;
  spec.virtual_start = virtual_start;
  spec.attention_mode = ns->attention_mode;
  spec.sys_key = ns->sys_key;
  spec.tenant = ns->tenant;
  spec.scope = ns->scope;
  spec.threads = options_.store_threads;
  auto size = device::GatherSize(cache, slots, options_.rope, spec);
  if (!size.ok()) return fail(size.status());
  return StoreObject(
      key, *size,
      [&](std::span<uint8_t> out, bool checksum, const WrittenFn& written) {
        spec.checksum = checksum;
        spec.written = written;
        return device::GatherInto(cache, slots, options_.rope, spec, out);
      },
      async);
}

}  // namespace pikv::client
