#include "pikv/node/reporter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <utility>

#include "pikv/common/guarded_thread.h"
#include "pikv/node/elected_epochs.h"
#include "pikv/node/node_stats.h"
#include "pikv/proto/control_wire.h"
#include "pikv/proto/location.h"
#include "pikv/proto/owner.h"
#include "pikv/transport/zmq_frames.h"

namespace pikv::node {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t RandomIncarnation() {
  std::random_device rd;
  return (uint64_t{rd()} << 32 | rd()) & INT64_MAX;
}

// The owner table of one report (control_wire.h: NodeReport::owners): a
// slot per distinct owner, at most kMaxOwnersPerReport.
class ReportOwners {
 public:
  // The slot for `owner` (0: not known); nullopt when the table is full
  // and the report must end before this entry.
  std::optional<int> Slot(const std::optional<Owner>& owner) {
    if (!owner) return 0;
    std::string wire = OwnerWire(*owner);
    auto it = slots_.find(wire);
    if (it != slots_.end()) return it->second;
    if (slots_.size() >= static_cast<size_t>(kMaxOwnersPerReport)) return std::nullopt;
    const int slot = static_cast<int>(slots_.size()) + 1;
    slots_.emplace(std::move(wire), slot);
    owners_.push_back(owner);
    return slot;
  }
  std::vector<std::optional<Owner>> Take() {
    slots_.clear();
    return std::exchange(owners_, {});
  }

 private:
  std::map<std::string, int> slots_;          // by OwnerWire text
  std::vector<std::optional<Owner>> owners_;  // slot i at i - 1
};

}  // namespace

void EventQueue::Push(std::span<const storage::TierEvent> events) {
  std::lock_guard lock(mu_);
  if (dirty_) return;  // a full resync is coming anyway
  if (events_.size() + events.size() > capacity_) {
    events_.clear();
    dirty_ = true;
    overflows_++;
    return;
  }
  events_.insert(events_.end(), events.begin(), events.end());
}

bool EventQueue::Take(size_t max, std::vector<storage::TierEvent>& out) {
  std::lock_guard lock(mu_);
  const bool was_dirty = dirty_;
  dirty_ = false;
  while (!events_.empty() && out.size() < max) {
    out.push_back(events_.front());
    events_.pop_front();
  }
  return was_dirty;
}

void EventQueue::Clear() {
  std::lock_guard lock(mu_);
  events_.clear();
  dirty_ = false;
}

size_t EventQueue::size() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

Reporter::Reporter(ReporterOptions options, EventQueue& queue, storage::StorageManager& storage,
                   RequestHandler& handler, uint64_t capacity_cpu, uint64_t capacity_disk)
    : options_(std::move(options)),
      queue_(queue),
      storage_(storage),
      handler_(handler),
      capacity_cpu_(capacity_cpu),
      capacity_disk_(capacity_disk),
      incarnation_(RandomIncarnation()) {}

Reporter::~Reporter() { Stop(); }

void Reporter::Start() {
  // A failure is logged, and the controller sees this node go silent and
  // dead instead of the process aborting.
  thread_ = GuardedThread("reporter", [this] { Run(); });
}

void Reporter::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  thread_.join();
}

std::string Reporter::controller() const {
  std::lock_guard lock(controller_mu_);
  return controller_;
}

namespace {

// The controller's commands on what the node holds; they come over the
// connection the node dialed, never to its server (permissions.h).
bool IsStorageCommand(MsgType type) {
  return type == MsgType::kClear || type == MsgType::kPin || type == MsgType::kUnpin ||
         type == MsgType::kDelete || type == MsgType::kRevoke;
}

void CarryOut(const Header& h, storage::StorageManager& storage, const ReporterOptions& o) {
  switch (h.type) {
    case MsgType::kClear:
      spdlog::info("reporter: controller asked to clear: {} objects dropped", storage.Clear());
      break;
    case MsgType::kPin:
      for (const auto& k : h.keys) storage.Pin(k).IgnoreError();
      break;
    case MsgType::kUnpin:
      for (const auto& k : h.keys) storage.Unpin(k).IgnoreError();
      break;
    case MsgType::kDelete:
      for (const auto& k : h.keys) storage.Delete(k).IgnoreError();
      break;
    case MsgType::kRevoke:
      if (const Revocation r = DecodeRevoke(h); o.on_revoke && IsIdentityName(r.engine))
        o.on_revoke(r.engine, r.sweep_shared);
      break;
    default:  // not a command (a newer controller's): ignored
      break;
  }
}

}  // namespace

// The reporter thread's state: one connection to the controller it follows.
class Reporter::Loop {
 public:
  explicit Loop(Reporter& r) : r_(r), o_(r.options_) {}

  void Run() {
    auto next_heartbeat = Clock::now();
    while (!r_.stopping_) {
      const auto now = Clock::now();
      Follow(now);
      if (!r_.registered_ && now >= register_at_) {
        Register();
        register_at_ = now + o_.heartbeat_interval;  // retry if no answer
      }
      if (r_.registered_) SendEvents(now);
      if (r_.registered_ && now >= next_heartbeat) {
        if (inventory_owed_) SendInventory();
        Send(EncodeHeartbeat(UsageOf(r_.handler_.stats().Read())));
        next_heartbeat = now + o_.heartbeat_interval;
      }
      if (!socket_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, std::chrono::milliseconds(5));
      } catch (const zmq::error_t&) {
        break;
      }
      while (socket_ && RecvFrames(*socket_, frames_, zmq::recv_flags::dontwait)) {
        auto msg = ParseFrames(frames_, 0, WireLimits{});
        if (msg.ok()) OnMessage(msg->header);
      }
    }
    if (r_.registered_) {
      Header h;
      h.type = MsgType::kDeregister;
      Send(std::move(h));
    }
  }

 private:
  // Connects to the controller the finder names, and gives up on one that
  // has stopped answering.
  void Follow(Clock::time_point now) {
    const std::string target = o_.finder->Current();
    if (target != connected_) Connect(target, now);
    if (!o_.finder->follows() || connected_.empty()) return;
    const auto patience = o_.heartbeat_interval + std::chrono::milliseconds(500);
    if (now - last_heard_ > patience && now >= next_ask_) {
      o_.finder->Failed(connected_);  // ask again: the next listed, or etcd
      next_ask_ = now + std::chrono::milliseconds(250);
    }
  }

  void Connect(const std::string& endpoint, Clock::time_point now) {
    socket_.reset();
    r_.registered_ = false;
    connected_ = endpoint;
    last_heard_ = now;
    {
      std::lock_guard lock(r_.controller_mu_);
      r_.controller_ = endpoint;
    }
    if (endpoint.empty()) return;
    spdlog::info("reporter: reporting to controller {}", endpoint);
    socket_ = std::make_unique<zmq::socket_t>(ClientContext(), zmq::socket_type::dealer);
    socket_->set(zmq::sockopt::linger, 500);  // let the deregister go out
    socket_->set(zmq::sockopt::reconnect_ivl, 100);
    socket_->set(zmq::sockopt::reconnect_ivl_max, 2000);
    if (o_.security) {
      if (auto keys = o_.security->ForController(); keys.ok()) DialCurve(socket_->handle(), *keys);
    }
    try {
      socket_->connect(endpoint);
    } catch (const zmq::error_t& e) {  // a spec or a redirect naming no endpoint
      spdlog::error("reporter: cannot dial controller {}: {}", endpoint, e.what());
      socket_.reset();
      o_.finder->Failed(endpoint);
      return;
    }
    register_at_ = now + Jitter();
  }

  std::chrono::milliseconds Jitter() {
    return std::chrono::milliseconds(rng_() % (o_.register_jitter.count() + 1));
  }

  bool Send(Header h) {
    if (!socket_) return false;
    EncodeNodeIdentity({o_.node_id, r_.incarnation_}, h);
    std::vector<zmq::message_t> none;
    return SendMessage(*socket_, none, h, {}, /*dontwait=*/true);
  }

  NodeReport Report() const {
    NodeReport report;
    report.node_id = o_.node_id;
    report.incarnation = r_.incarnation_;
    return report;
  }

  void Register() {
    Send(EncodeRegister({o_.node_id, o_.host, o_.tcp, o_.ipc, r_.incarnation_, r_.capacity_cpu_,
                         r_.capacity_disk_}));
  }

  void SendInventory() {
    r_.queue_.Clear();  // the snapshot supersedes every event queued before it
    inventory_owed_ = false;
    r_.inventories_++;
    std::vector<std::pair<ChunkKey, TierKind>> all;
    for (const auto& k : r_.storage_.cpu().LruOrder()) all.emplace_back(k, TierKind::kCpu);
    if (r_.storage_.disk()) {
      for (const auto& k : r_.storage_.disk()->LruOrder()) all.emplace_back(k, TierKind::kDisk);
    }
    // Parts fit what the controller decodes (one definition: WireLimits).
    const size_t part_keys = std::clamp<size_t>(o_.inventory_part, 1, WireLimits{}.max_batch);
    uint64_t part = 0;
    size_t i = 0;
    ReportOwners owners;
    do {
      NodeReport report = Report();
      report.seq = seq_;
      report.part = part++;
      for (; i < all.size() && report.keys.size() < part_keys; ++i) {
        const auto slot = owners.Slot(r_.storage_.LocalOwner(all[i].first));
        if (!slot) break;  // the part's owner table is full: the next part goes on
        report.keys.push_back(all[i].first);
        report.values.push_back(EncodeHeld(all[i].second, *slot));
      }
      report.owners = owners.Take();
      report.final = i == all.size();
      if (!Send(EncodeReport(MsgType::kInventory, std::move(report)))) {
        // The socket would block (controller gone or slow): try again later;
        // the controller also asks again while the inventory is overdue.
        inventory_owed_ = true;
        return;
      }
    } while (i < all.size());
    spdlog::info("reporter: inventory of {} entries sent to {}", all.size(), connected_);
  }

  // Events: batched by count or by age.
  void SendEvents(Clock::time_point now) {
    EventQueue& queue = r_.queue_;
    if (queue.size() > 0 && first_event_at_ == Clock::time_point::max()) first_event_at_ = now;
    if (queue.size() < o_.batch_events && now - first_event_at_ < o_.batch_delay) return;
    batch_.clear();
    if (queue.Take(o_.batch_events, batch_)) {
      spdlog::warn("reporter: event queue overflowed, sending a full inventory");
      SendInventory();
    } else {
      SendBatch();
    }
    first_event_at_ = queue.size() > 0 ? now : Clock::time_point::max();
  }

  // batch_ as event reports, each with the owners of what it admits; a
  // report ends early when its owner table is full.
  void SendBatch() {
    ReportOwners owners;
    for (size_t i = 0; i < batch_.size();) {
      NodeReport report = Report();
      report.seq = ++seq_;
      for (; i < batch_.size(); ++i) {
        const auto& e = batch_[i];
        const bool admit = e.kind == storage::EventKind::kAdmit;
        // The owner read as the object was admitted: it may be gone by now.
        const Owner* owner = FindOwner(e.owner);
        const auto slot = admit ? owners.Slot(owner ? std::optional(*owner) : std::nullopt) : 0;
        if (!slot) break;
        report.keys.push_back(e.key);
        report.values.push_back(EncodeEvent(e.tier, admit, *slot));
      }
      report.owners = owners.Take();
      if (!Send(EncodeReport(MsgType::kEvents, std::move(report))))
        spdlog::debug("reporter: event batch {} not sent", seq_);
    }
  }

  void OnMessage(const Header& h) {
    last_heard_ = Clock::now();
    if (h.status == ErrorCode::kNotLeader) {
      r_.registered_ = false;
      const std::string leader = o_.finder->FollowNotLeader(h);
      spdlog::info("reporter: {} is not the leader; {}", connected_,
                   leader.empty() ? "no leader yet" : "the leader is " + leader);
      next_ask_ = Clock::now() + std::chrono::milliseconds(250);
      // Register again, here or wherever the finder now points (a leader
      // whose renewal came late resumes at the same endpoint and epoch).
      register_at_ = Clock::now() + std::chrono::milliseconds(250) + Jitter();
      return;
    }
    // Commands come only from the leadership this node registered with.
    const std::optional<std::string> epoch = EpochOf(h).epoch;
    if ((h.type == MsgType::kResync || IsStorageCommand(h.type)) && epoch && *epoch != epoch_) {
      spdlog::warn("reporter: ignored {} of epoch {} (registered at {})", MsgTypeName(h.type),
                   *epoch, epoch_);
      return;
    }
    switch (h.type) {
      case MsgType::kRegister:
        if (h.status == ErrorCode::kOk &&
            epochs_.Current(h, connected_, /*adopting=*/true, Clock::now())) {
          epoch_ = epoch.value_or("");
          seq_ = 0;
          r_.registered_ = true;
          register_at_ = Clock::time_point::max();
          spdlog::info("reporter: registered with controller {} epoch {}", connected_, epoch_);
          // Swept in the remote tier when it was revoked: this node's only.
          for (const std::string& engine : DecodeRegisterReply(h).revoked) {
            if (o_.on_revoke) o_.on_revoke(engine, false);
          }
          SendInventory();
        }
        break;
      case MsgType::kError:
        // The controller refused something we sent (only an undecodable
        // message gets this): our picture there is incomplete; resync.
        r_.refused_++;
        spdlog::warn("reporter: controller refused a message: {}", h.reason);
        if (r_.registered_) SendInventory();
        break;
      case MsgType::kHeartbeat:
        OnHeartbeatReply(h);
        break;
      case MsgType::kResync:
        if (r_.registered_) SendInventory();
        break;
      default:
        CarryOut(h, r_.storage_, o_);
        break;
    }
  }

  void OnHeartbeatReply(const Header& h) {
    if (!epochs_.Current(h, connected_, /*adopting=*/false, Clock::now())) {
      // The controller followed now speaks for an older leadership than one
      // seen (it lost its lease, or etcd's history was rewound and it won
      // again): register again, where the finder points, so that a rewound
      // history is recognised (Rewound) rather than ignored forever.
      if (r_.registered_) {
        r_.registered_ = false;
        register_at_ = Clock::now() + Jitter();
      }
      return;
    }
    if (h.status == ErrorCode::kOk && DecodeHeartbeatReply(h).resync && r_.registered_)
      SendInventory();
    const std::string epoch = EpochOf(h).epoch.value_or("");
    if (h.status == ErrorCode::kNotFound || (!epoch.empty() && epoch != epoch_)) {
      // The controller restarted, or a new leader took over, or it forgot
      // us: register again, jittered so that nodes do not come all at once.
      r_.registered_ = false;
      const auto jitter = Jitter();
      register_at_ = Clock::now() + jitter;
      spdlog::info("reporter: controller {} (epoch {}), registering again in {} ms",
                   h.status == ErrorCode::kNotFound ? "does not know us" : "restarted", epoch,
                   jitter.count());
    }
  }

  Reporter& r_;
  const ReporterOptions& o_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string connected_;  // the controller socket_ dials
  std::vector<zmq::message_t> frames_;
  std::vector<storage::TierEvent> batch_;
  std::string epoch_;                             // of the controller this node registered with
  ElectedEpochs epochs_;                          // which leadership may be followed
  uint64_t seq_ = 0;                              // last event batch sent in this incarnation
  bool inventory_owed_ = false;                   // a send failed: send the whole inventory again
  Clock::time_point register_at_ = Clock::now();  // max() once registered
  Clock::time_point first_event_at_ = Clock::time_point::max();
  Clock::time_point last_heard_ = Clock::now(), next_ask_{};
  std::mt19937_64 rng_{std::random_device{}()};
};

void Reporter::Run() { Loop(*this).Run(); }

}  // namespace pikv::node
