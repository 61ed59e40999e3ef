#include "pikv/node/node_metrics.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace pikv::node {

namespace {

class Writer {
 public:
  void Family(const char* name, const char* type, const char* help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void Sample(const char* name, const std::string& labels, uint64_t value) {
    out_ << name;
    if (!labels.empty()) out_ << "{" << labels << "}";
    out_ << " " << value << "\n";
  }
  void Raw(const std::string& text) { out_ << text; }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

std::string Label(const char* key, std::string_view value) {
  return std::string(key) + "=\"" + std::string(value) + "\"";
}

}  // namespace

std::string NodeMetricsText(const RequestHandler& handler, storage::StorageManager& storage,
                            const Reporter* reporter) {
  Writer w;
  const NodeCounters c = handler.Counters();
  w.Family("pikv_node_requests_total", "counter", "Requests served, by operation.");
  const std::pair<const char*, uint64_t> ops[] = {
      {"get", c.gets},     {"put", c.puts},     {"exists", c.exists}, {"delete", c.deletes},
      {"pin", c.pins},     {"unpin", c.unpins}, {"stats", c.stats},   {"ping", c.pings},
      {"clear", c.clears}, {"pull", c.pulls}};
  for (const auto& [op, n] : ops) w.Sample("pikv_node_requests_total", Label("op", op), n);
  w.Family("pikv_node_request_errors_total", "counter", "Requests refused, by reason.");
  const std::pair<const char*, uint64_t> errs[] = {{"malformed", c.malformed},
                                                   {"too_large", c.too_large},
                                                   {"unsupported", c.unsupported},
                                                   {"bad_request", c.bad_requests},
                                                   {"busy", c.busy}};
  for (const auto& [kind, n] : errs)
    w.Sample("pikv_node_request_errors_total", Label("reason", kind), n);
  w.Family("pikv_node_bytes_total", "counter", "Payload bytes received and sent.");
  w.Sample("pikv_node_bytes_total", Label("direction", "in"), c.bytes_in);
  w.Sample("pikv_node_bytes_total", Label("direction", "out"), c.bytes_out);
  w.Family("pikv_node_p2p_pulled_objects_total", "counter",
           "Objects pulled from peers and admitted here.");
  w.Sample("pikv_node_p2p_pulled_objects_total", "", c.pulled_objects);
  w.Family("pikv_node_p2p_pull_failures_total", "counter",
           "Asks of the controller or a peer, within pulls, that were not answered.");
  w.Sample("pikv_node_p2p_pull_failures_total", "", c.pull_failures);
  w.Family("pikv_node_p2p_pulls_from_memory_total", "counter",
           "Pulls planned on the last locations seen while no controller answered.");
  w.Sample("pikv_node_p2p_pulls_from_memory_total", "", c.pulls_from_memory);

  w.Family("pikv_node_p2p_pulled_streamed_total", "counter",
           "Objects pulled from peers in bounded frames.");
  w.Sample("pikv_node_p2p_pulled_streamed_total", "", c.pulled_streamed);
  w.Family("pikv_node_streamed_replies_total", "counter",
           "Get replies sent in bounded frames (to pulling peers).");
  w.Sample("pikv_node_streamed_replies_total", "", c.streamed);
  // The zero-copy channel (absent when it is off): what it counted, and what
  // local clients hold now.
  const Fields stats = handler.StatsFields();
  w.Family("pikv_node_streamed_puts_total", "counter",
           "Puts received in bounded frames, by outcome: started, completed, refused (could not "
           "start, or failed verification), broken (a frame of the wrong size), expired "
           "(stalled).");
  for (const char* outcome : {"started", "completed", "refused", "broken", "expired"}) {
    const int64_t v = FieldInt(stats, std::string("streamed_puts.") + outcome, -1);
    if (v >= 0) w.Sample("pikv_node_streamed_puts_total", Label("outcome", outcome), uint64_t(v));
  }
  w.Family("pikv_node_zero_copy_events_total", "counter",
           "Zero-copy channel events: clients, refused_clients, requests, errors, leased_objects, "
           "commits, commit_failures, sealed_ahead, sealed_whole (sealing commits hashed as the "
           "object was written, or after), expired, dropped, refused.");
  for (const char* event :
       {"clients", "refused_clients", "requests", "errors", "leased_objects", "commits",
        "commit_failures", "sealed_ahead", "sealed_whole", "expired", "dropped", "refused"}) {
    const int64_t v = FieldInt(stats, std::string("zero_copy.") + event, -1);
    if (v >= 0) w.Sample("pikv_node_zero_copy_events_total", Label("event", event), uint64_t(v));
  }
  w.Family("pikv_node_zero_copy_held", "gauge",
           "What local clients hold of the CPU arena now: leases, reservations, lent_bytes.");
  for (const char* kind : {"leases", "reservations", "lent_bytes"}) {
    const int64_t v = FieldInt(stats, std::string("zero_copy.") + kind, -1);
    if (v >= 0) w.Sample("pikv_node_zero_copy_held", Label("kind", kind), uint64_t(v));
  }

  // Zero for a node that reports to no controller.
  w.Family("pikv_node_reporter_inventories_total", "counter",
           "Full inventories sent to the controller (registrations, resyncs, retries).");
  w.Sample("pikv_node_reporter_inventories_total", "", reporter ? reporter->inventories_sent() : 0);
  w.Family("pikv_node_reporter_refused_total", "counter",
           "Messages the controller refused; each one triggers a full inventory.");
  w.Sample("pikv_node_reporter_refused_total", "", reporter ? reporter->refused() : 0);

  const storage::StorageStats s = storage.Stats();
  struct Tier {
    const char* metric;
    const char* type;
    const char* help;
    uint64_t storage::TierStats::*field;
  };
  const Tier tier_metrics[] = {
      {"pikv_node_tier_hits_total", "counter", "Lookups that found the object, by tier.",
       &storage::TierStats::hits},
      {"pikv_node_tier_misses_total", "counter", "Lookups that did not, by tier.",
       &storage::TierStats::misses},
      {"pikv_node_tier_admits_total", "counter", "Objects admitted, by tier.",
       &storage::TierStats::admits},
      {"pikv_node_tier_evictions_total", "counter", "Objects evicted or removed, by tier.",
       &storage::TierStats::evictions},
      {"pikv_node_tier_rejects_total", "counter",
       "Writes refused (full, pinned, circuit open), by tier.", &storage::TierStats::rejects},
      {"pikv_node_tier_corruptions_total", "counter", "Corrupt copies found and deleted, by tier.",
       &storage::TierStats::corruptions},
      {"pikv_node_tier_errors_total", "counter", "I/O errors, by tier.",
       &storage::TierStats::errors},
      {"pikv_node_tier_used_bytes", "gauge", "Bytes held, by tier.",
       &storage::TierStats::used_bytes},
      {"pikv_node_tier_capacity_bytes", "gauge", "Byte capacity (0 = not tracked), by tier.",
       &storage::TierStats::capacity_bytes},
      {"pikv_node_tier_chunks", "gauge", "Chunk objects held, by tier.",
       &storage::TierStats::entries},
  };
  for (const Tier& m : tier_metrics) {
    w.Family(m.metric, m.type, m.help);
    for (int t = 0; t < storage::kNumTiers; ++t) {
      if (s.tiers[t])
        w.Sample(m.metric, Label("tier", TierName(static_cast<TierKind>(t))),
                 (*s.tiers[t]).*m.field);
    }
  }
  w.Family("pikv_node_arena_faulted_bytes", "gauge",
           "CPU arena bytes faulted in by the background prefault (0: prefault off).");
  w.Sample("pikv_node_arena_faulted_bytes", "",
           s.tiers[static_cast<int>(TierKind::kCpu)].value_or(storage::TierStats{}).faulted_bytes);
  w.Family("pikv_node_promotions_total", "counter", "Lower-tier hits copied up to the CPU tier.");
  w.Sample("pikv_node_promotions_total", "", s.promotions);
  w.Family("pikv_node_put_rejects_total", "counter",
           "Puts refused because the object did not verify.");
  w.Sample("pikv_node_put_rejects_total", "", s.put_rejects);
  w.Family("pikv_node_queue_depth", "gauge", "Write-through jobs waiting or running, by queue.");
  w.Family("pikv_node_queue_dropped_total", "counter",
           "Write-through jobs dropped because the queue was full.");
  for (const auto& [name, q] :
       {std::pair{"disk", s.disk_queue}, std::pair{"remote", s.remote_queue}}) {
    if (!q) continue;
    w.Sample("pikv_node_queue_depth", Label("queue", name), q->depth);
    w.Sample("pikv_node_queue_dropped_total", Label("queue", name), q->dropped);
  }
  w.Family("pikv_node_request_seconds", "histogram",
           "Request latency inside the node, by operation class.");
  w.Raw(handler.latency(RequestHandler::LatencyClass::kGet)
            .Render("pikv_node_request_seconds", Label("op", "get")));
  w.Raw(handler.latency(RequestHandler::LatencyClass::kPut)
            .Render("pikv_node_request_seconds", Label("op", "put")));
  w.Raw(handler.latency(RequestHandler::LatencyClass::kOther)
            .Render("pikv_node_request_seconds", Label("op", "other")));
  return w.str();
}

std::string NodeHealthJson(const std::string& node_id, bool registered, bool has_controller,
                           const storage::TierStats& cpu) {
  // The node serves while its arena is faulted in; that only says how fast.
  const nlohmann::json j = {
      {"status", !has_controller || registered ? "ok" : "degraded"},
      {"node_id", node_id},
      {"controller", has_controller ? (registered ? "registered" : "unreachable") : "none"},
      {"arena_bytes", cpu.capacity_bytes},
      {"arena_faulted_bytes", cpu.faulted_bytes}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pikv::node
