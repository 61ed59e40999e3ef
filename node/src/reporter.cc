#include "pikv/node/reporter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "pikv/proto/location.h"
#include "pikv/proto/zmq_frames.h"

namespace pikv::node {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t RandomIncarnation() {
  std::random_device rd;
  return (uint64_t{rd()} << 32 | rd()) & INT64_MAX;
}

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

struct Reporter::Impl {
  zmq::socket_t socket{ClientContext(), zmq::socket_type::dealer};
  std::vector<zmq::message_t> frames;
  std::string epoch;
  uint64_t seq = 0;  // last event batch sent in this incarnation
  std::mt19937_64 rng{std::random_device{}()};
};

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
  thread_ = std::thread([this] { Run(); });
}

void Reporter::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  thread_.join();
}

void Reporter::Run() {
  // Nothing may escape a thread: a failure is logged, and the controller
  // sees this node go silent and dead instead of the process aborting.
  try {
    Report();
  } catch (const std::exception& e) {
    spdlog::critical("reporter thread failed: {}", e.what());
  }
}

void Reporter::Report() {
  Impl impl;
  impl.socket.set(zmq::sockopt::linger, 500);  // let the deregister go out
  impl.socket.set(zmq::sockopt::reconnect_ivl, 100);
  impl.socket.set(zmq::sockopt::reconnect_ivl_max, 2000);
  if (options_.security) {
    if (auto keys = options_.security->ForController(); keys.ok())
      DialCurve(impl.socket.handle(), *keys);
  }
  impl.socket.connect(options_.controller);

  auto identity = [&](Header& h) {
    h.fields["node_id"] = options_.node_id;
    h.fields["incarnation"] = static_cast<int64_t>(incarnation_);
  };
  auto send = [&](Header h) {
    identity(h);
    std::vector<zmq::message_t> none;
    return SendMessage(impl.socket, none, h, {}, /*dontwait=*/true);
  };
  // Parts fit what the controller decodes (one definition: WireLimits).
  const size_t part_keys = std::clamp<size_t>(options_.inventory_part, 1, WireLimits{}.max_batch);
  bool inventory_owed = false;  // a send failed: send the whole inventory again
  auto send_inventory = [&] {
    queue_.Clear();  // the snapshot supersedes every event queued before it
    inventory_owed = false;
    inventories_++;
    std::vector<std::pair<ChunkKey, TierKind>> all;
    for (const auto& k : storage_.cpu().LruOrder()) all.emplace_back(k, TierKind::kCpu);
    if (storage_.disk()) {
      for (const auto& k : storage_.disk()->LruOrder()) all.emplace_back(k, TierKind::kDisk);
    }
    uint64_t part = 0;
    size_t i = 0;
    do {
      Header h;
      h.type = MsgType::kInventory;
      h.fields["seq"] = static_cast<int64_t>(impl.seq);
      h.fields["part"] = static_cast<int64_t>(part++);
      for (; i < all.size() && h.keys.size() < part_keys; ++i) {
        h.keys.push_back(all[i].first);
        h.values.push_back(static_cast<int64_t>(all[i].second));  // kind 0: held
      }
      h.fields["final"] = int64_t{i == all.size()};
      if (!send(std::move(h))) {
        // The socket would block (controller gone or slow): try again later;
        // the controller also asks again while the inventory is overdue.
        inventory_owed = true;
        return;
      }
    } while (i < all.size());
    spdlog::info("reporter: inventory of {} entries sent to {}", all.size(), options_.controller);
  };
  auto do_register = [&] {
    Header h;
    h.type = MsgType::kRegister;
    h.fields["host"] = options_.host;
    h.fields["tcp"] = options_.tcp;
    h.fields["ipc"] = options_.ipc;
    h.fields["cpu_capacity"] = static_cast<int64_t>(capacity_cpu_);
    h.fields["disk_capacity"] = static_cast<int64_t>(capacity_disk_);
    send(std::move(h));
  };

  std::vector<storage::TierEvent> batch;
  auto next_heartbeat = Clock::now();
  auto register_at = Clock::now();  // when to (re)send a register; max() once registered
  auto first_event_at = Clock::time_point::max();
  zmq::pollitem_t item{impl.socket.handle(), 0, ZMQ_POLLIN, 0};
  while (!stopping_) {
    const auto now = Clock::now();
    if (!registered_ && now >= register_at) {
      do_register();
      register_at = now + options_.heartbeat_interval;  // retry if no answer
    }
    // Events: batch by count or by age.
    if (registered_) {
      if (queue_.size() > 0 && first_event_at == Clock::time_point::max()) first_event_at = now;
      if (queue_.size() >= options_.batch_events || now - first_event_at >= options_.batch_delay) {
        batch.clear();
        if (queue_.Take(options_.batch_events, batch)) {
          spdlog::warn("reporter: event queue overflowed, sending a full inventory");
          send_inventory();
        } else if (!batch.empty()) {
          Header h;
          h.type = MsgType::kEvents;
          h.fields["seq"] = static_cast<int64_t>(++impl.seq);
          for (const auto& e : batch) {
            h.keys.push_back(e.key);
            h.values.push_back(EncodeEvent(e.tier, e.kind == storage::EventKind::kAdmit));
          }
          if (!send(std::move(h))) spdlog::debug("reporter: event batch {} not sent", impl.seq);
        }
        first_event_at = queue_.size() > 0 ? now : Clock::time_point::max();
      }
    }
    if (registered_ && inventory_owed && now >= next_heartbeat) send_inventory();
    if (registered_ && now >= next_heartbeat) {
      Header h;
      h.type = MsgType::kHeartbeat;
      h.fields = handler_.StatsFields();
      send(std::move(h));
      next_heartbeat = now + options_.heartbeat_interval;
    }
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(5));
    } catch (const zmq::error_t&) {
      break;
    }
    while (RecvFrames(impl.socket, impl.frames, zmq::recv_flags::dontwait)) {
      auto msg = ParseFrames(impl.frames, 0, WireLimits{});
      if (!msg.ok()) continue;
      const Header& h = msg->header;
      switch (h.type) {
        case MsgType::kRegister:
          if (h.status == ErrorCode::kOk) {
            impl.epoch = FieldString(h.fields, "epoch");
            impl.seq = 0;
            registered_ = true;
            register_at = Clock::time_point::max();
            spdlog::info("reporter: registered with controller epoch {}", impl.epoch);
            send_inventory();
            next_heartbeat = Clock::now() + options_.heartbeat_interval;
          }
          break;
        case MsgType::kError:
          // The controller refused something we sent (only an undecodable
          // message gets this): our picture there is incomplete; resync.
          refused_++;
          spdlog::warn("reporter: controller refused a message: {}", h.reason);
          if (registered_) send_inventory();
          break;
        case MsgType::kHeartbeat: {
          if (h.status == ErrorCode::kOk && FieldInt(h.fields, "resync") != 0 && registered_)
            send_inventory();
          const std::string epoch = FieldString(h.fields, "epoch");
          if (h.status == ErrorCode::kNotFound || (!epoch.empty() && epoch != impl.epoch)) {
            // The controller restarted or forgot us: register again, jittered.
            registered_ = false;
            const auto jitter =
                std::chrono::milliseconds(impl.rng() % (options_.register_jitter.count() + 1));
            register_at = Clock::now() + jitter;
            spdlog::info("reporter: controller {} (epoch {}), registering again in {} ms",
                         h.status == ErrorCode::kNotFound ? "does not know us" : "restarted", epoch,
                         jitter.count());
          }
          break;
        }
        case MsgType::kResync:
          if (registered_) send_inventory();
          break;
        case MsgType::kClear:
          spdlog::info("reporter: controller asked to clear: {} objects dropped", storage_.Clear());
          break;
        case MsgType::kPin:
          for (const auto& k : h.keys) storage_.Pin(k).IgnoreError();
          break;
        case MsgType::kUnpin:
          for (const auto& k : h.keys) storage_.Unpin(k).IgnoreError();
          break;
        case MsgType::kDelete:
          for (const auto& k : h.keys) storage_.Delete(k).IgnoreError();
          break;
        default:
          break;
      }
    }
  }
  if (registered_) {
    Header h;
    h.type = MsgType::kDeregister;
    send(std::move(h));
  }
}

}  // namespace pikv::node
