#include "pikv/node/node_metrics.h"

#include <nlohmann/json.hpp>

namespace pikv::node {

std::string NodeMetricsText(const RequestHandler& handler) {
  std::string text = handler.stats().PrometheusText();
  // The latency histograms: not counters, rendered by their own.
  text +=
      "# HELP pikv_node_request_seconds Request latency inside the node, by operation class.\n"
      "# TYPE pikv_node_request_seconds histogram\n";
  const std::pair<Latency, const char*> classes[] = {
      {Latency::kGet, "get"}, {Latency::kPut, "put"}, {Latency::kOther, "other"}};
  for (const auto& [c, op] : classes)
    text +=
        handler.latency(c).Render("pikv_node_request_seconds", std::string("op=\"") + op + "\"");
  return text;
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
