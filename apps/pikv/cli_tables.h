// Human tables for the controller's admin documents (proto/admin_wire.h);
// shared by `pikv admin` and `pikv demo`. A document that lacks a member or
// has one of another type throws nlohmann::json::exception: callers catch it
// and report the reply as unexpected.
#pragma once

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pikv/common/text_table.h"
#include "pikv/common/units.h"
#include "pikv/proto/admin_wire.h"

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

inline std::string Str(const json& j, const char* member) {
  return j.at(member).get<std::string>();
}
inline std::string Bytes(const json& v) { return pikv::FormatBytes(v.get<uint64_t>()); }

inline void PrintNodes(const json& j) {
  pikv::TextTable t({"node", "state", "host", "tcp", "cpu chunks", "cpu used", "disk chunks",
                     "disk used", "heartbeat"});
  for (const auto& n : j.at(admin::kNodes)) {
    const auto& cpu = n.at(admin::kTiers).at("cpu");
    const auto& disk = n.at(admin::kTiers).at("disk");
    t.Add({Str(n, admin::kId), Str(n, admin::kState), Str(n, admin::kHost), Str(n, admin::kTcp),
           Num(cpu.at(admin::kChunks)), Bytes(cpu.at(admin::kUsedBytes)),
           Num(disk.at(admin::kChunks)), Bytes(disk.at(admin::kUsedBytes)),
           Num(n.at(admin::kSecondsSinceHeartbeat)) + "s ago"});
  }
  t.Print(std::cout);
}

inline void PrintStats(const json& j) {
  std::cout << "nodes: " << j.at(admin::kNodesAlive) << " alive, " << j.at(admin::kNodesSuspect)
            << " suspect, " << j.at(admin::kNodesDead) << " dead\n"
            << "registry: " << j.at(admin::kKeys) << " keys, " << j.at(admin::kLocations)
            << " locations, " << Bytes(j.at(admin::kRegistryBytes)) << "\n"
            << "events: " << j.at(admin::kEventsApplied) << " applied, "
            << Num(j.at(admin::kEventsPerSecond)) << "/s, " << j.at(admin::kSequenceGaps)
            << " gaps, " << j.at(admin::kResyncs) << " resyncs\n\n";
  pikv::TextTable t({"tier", "chunks", "used", "capacity", "hits", "misses", "hit rate"});
  for (const char* tier : {"cpu", "disk", "remote"}) {
    const auto& x = j.at(admin::kTiers).at(tier);
    t.Add({tier, Num(x.at(admin::kChunks)), Bytes(x.at(admin::kUsedBytes)),
           Bytes(x.at(admin::kCapacityBytes)), Num(x.at(admin::kHits)), Num(x.at(admin::kMisses)),
           Num(x.at(admin::kHitRate))});
  }
  t.Print(std::cout);
  if (!j.contains(admin::kP2p)) return;  // a controller older than P2P figures
  const json& p2p = j.at(admin::kP2p);
  std::cout << "\np2p: " << p2p.at(admin::kPulledObjects) << " objects pulled ("
            << Bytes(p2p.at(admin::kPulledBytes)) << "), " << p2p.at(admin::kPullFailures)
            << " failed asks\n\n";
  pikv::TextTable nodes({"node", "state", "cpu chunks", "disk chunks", "hits", "misses", "pulled",
                         "pulled bytes", "pull failures"});
  for (const auto& n : j.at(admin::kPerNode)) {
    const json& pulls = n.at(admin::kP2p);
    nodes.Add({Str(n, admin::kId), Str(n, admin::kState), Num(n.at(admin::kCpuChunks)),
               Num(n.at(admin::kDiskChunks)), Num(n.at(admin::kHits)), Num(n.at(admin::kMisses)),
               Num(pulls.at(admin::kPulledObjects)), Bytes(pulls.at(admin::kPulledBytes)),
               Num(pulls.at(admin::kPullFailures))});
  }
  nodes.Print(std::cout);
}

inline void PrintLocate(const json& j) {
  pikv::TextTable t({"key", "node", "tier", "host", "tcp"});
  for (const auto& k : j.at(admin::kKeys)) {
    const auto& locations = k.at(admin::kLocations);
    if (locations.empty()) t.Add({Str(k, admin::kKey), "-", "-", "-", "-"});
    for (const auto& l : locations) {
      t.Add({Str(k, admin::kKey), Str(l, admin::kNode), Str(l, admin::kTier), Str(l, admin::kHost),
             Str(l, admin::kTcp)});
    }
  }
  t.Print(std::cout);
}

// Per candidate node: a chunk set's tokens by where that node gets them.
inline void PrintScore(const json& j) {
  std::cout << j.at(admin::kKeys) << " chunks, " << j.at(admin::kTokens) << " tokens\n";
  std::vector<std::string> header = {"node", "state"};
  header.insert(header.end(), std::begin(admin::kReaches), std::end(admin::kReaches));
  header.insert(header.end(), {"prefix", "requests/s"});
  pikv::TextTable t(header);
  for (const auto& n : j.at(admin::kNodes)) {
    std::vector<std::string> row = {Str(n, admin::kId), Str(n, admin::kState)};
    for (const char* reach : admin::kReaches) row.push_back(Num(n.at(admin::kTokens).at(reach)));
    row.push_back(Num(n.at(admin::kPrefixTokens)));
    row.push_back(Num(n.at(admin::kLoad).at(admin::kRequestsPerSecond)));
    t.Add(row);
  }
  t.Print(std::cout);
}

// The controllers' line of a health document: who leads, at which epoch,
// its lease, the standbys (a controller older than leadership prints none).
inline void PrintLeadership(const json& j) {
  if (!j.contains(admin::kRole)) return;
  const std::string role = Str(j, admin::kRole);
  if (role == "alone") {
    std::cout << "controller: alone (no standbys), epoch " << Str(j, admin::kEpoch) << "\n";
    return;
  }
  std::cout << "controller: leader " << Str(j, admin::kLeader) << ", epoch "
            << Str(j, admin::kEpoch) << ", lease " << j.at(admin::kLeaseLeftMs) << " of "
            << j.at(admin::kLeaseTtlMs) << " ms left; standbys:";
  const auto& standbys = j.at(admin::kStandbys);
  for (const auto& s : standbys) std::cout << " " << s.get<std::string>();
  if (standbys.empty()) std::cout << " none";
  std::cout << "\n";
}

// Returns the exit code: 0 when the cluster is healthy.
inline int PrintHealth(const json& j) {
  std::cout << "status: " << Str(j, admin::kStatus) << " (" << j.at(admin::kNodesAlive)
            << " alive, " << j.at(admin::kNodesSuspect) << " suspect, " << j.at(admin::kNodesDead)
            << " dead)\n";
  PrintLeadership(j);
  return Str(j, admin::kStatus) == "ok" ? 0 : 1;
}

inline void PrintForwarded(const json& j) {
  const auto& to = j.at(admin::kForwardedTo);
  std::cout << "sent to " << to.size() << " node(s)";
  for (const auto& id : to) std::cout << " " << id.get<std::string>();
  std::cout << "\n";
}

}  // namespace pikv::cli
