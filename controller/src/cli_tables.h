// Human tables for the controller's admin JSON; shared by `pikv admin` and
// `pikv demo`.
#pragma once

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pikv/proto/text_table.h"
#include "pikv/proto/units.h"

namespace pikv::cli {

using nlohmann::json;

inline std::string Num(const json& v) {
  if (v.is_number_float()) {
    std::ostringstream s;
    s.precision(3);
    s << v.get<double>();
    return s.str();
  }
  return v.dump();
}

inline std::string Bytes(const json& v) { return pikv::FormatBytes(v.get<uint64_t>()); }

inline void PrintNodes(const json& j) {
  pikv::TextTable t({"node", "state", "host", "tcp", "cpu chunks", "cpu used", "disk chunks",
                     "disk used", "heartbeat"});
  for (const auto& n : j["nodes"]) {
    const auto& tiers = n["tiers"];
    t.Add({n["id"].get<std::string>(), n["state"].get<std::string>(), n["host"].get<std::string>(),
           n["tcp"].get<std::string>(), Num(tiers["cpu"]["chunks"]),
           Bytes(tiers["cpu"]["used_bytes"]), Num(tiers["disk"]["chunks"]),
           Bytes(tiers["disk"]["used_bytes"]), Num(n["seconds_since_heartbeat"]) + "s ago"});
  }
  t.Print(std::cout);
}

inline void PrintStats(const json& j) {
  std::cout << "nodes: " << j["nodes_alive"] << " alive, " << j["nodes_suspect"] << " suspect, "
            << j["nodes_dead"] << " dead\n"
            << "registry: " << j["keys"] << " keys, " << j["locations"] << " locations, "
            << Bytes(j["registry_bytes"]) << "\n"
            << "events: " << j["events_applied"] << " applied, " << Num(j["events_per_second"])
            << "/s, " << j["sequence_gaps"] << " gaps, " << j["resyncs"] << " resyncs\n\n";
  pikv::TextTable t({"tier", "chunks", "used", "capacity", "hits", "misses", "hit rate"});
  for (const char* tier : {"cpu", "disk", "remote"}) {
    const auto& x = j["tiers"][tier];
    t.Add({tier, Num(x["chunks"]), Bytes(x["used_bytes"]), Bytes(x["capacity_bytes"]),
           Num(x["hits"]), Num(x["misses"]), Num(x["hit_rate"])});
  }
  t.Print(std::cout);
}

inline void PrintLocate(const json& j) {
  pikv::TextTable t({"key", "node", "tier", "host", "tcp"});
  for (const auto& k : j["keys"]) {
    if (k["locations"].empty()) t.Add({k["key"].get<std::string>(), "-", "-", "-", "-"});
    for (const auto& l : k["locations"]) {
      t.Add({k["key"].get<std::string>(), l["node"].get<std::string>(),
             l["tier"].get<std::string>(), l["host"].get<std::string>(),
             l["tcp"].get<std::string>()});
    }
  }
  t.Print(std::cout);
}

}  // namespace pikv::cli
