#include "pikv/coord/leader_key.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace pikv::coord {

std::string LeaderKey(const std::string& cluster) { return "pikv/" + cluster + "/leader"; }
std::string MembersPrefix(const std::string& cluster) {
  return "pikv/" + cluster + "/controllers/";
}

std::string RevokedPrefix(const std::string& cluster) { return "pikv/" + cluster + "/revoked/"; }

std::string ConfirmedPrefix(const std::string& cluster) {
  return "pikv/" + cluster + "/confirmed/";
}

Status CheckClusterName(const std::string& cluster) {
  const bool ok =
      !cluster.empty() && cluster.size() <= 64 &&
      std::all_of(cluster.begin(), cluster.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
      });
  return ok ? Status::Ok()
            : InvalidArgument("cluster name must be 1-64 of [A-Za-z0-9_.-]: '" + cluster + "'");
}

std::string ControllerValue(const ControllerInfo& info) {
  return nlohmann::json{{"endpoint", info.endpoint}, {"http", info.http}, {"epoch", info.epoch}}
      .dump();
}

Result<ControllerInfo> ControllerFromValue(const std::string& value) {
  const auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  auto text = [&](const char* name) -> const std::string* {
    auto it = j.is_object() ? j.find(name) : j.end();
    return it != j.end() && it->is_string() && it->get_ref<const std::string&>().size() <= 512
               ? &it->get_ref<const std::string&>()
               : nullptr;
  };
  if (!text("endpoint") || text("endpoint")->empty())
    return ProtocolError("etcd: a controller key whose value is not one");
  ControllerInfo info;
  info.endpoint = *text("endpoint");
  if (text("http")) info.http = *text("http");
  return info;
}

Result<ControllerInfo> LeaderFromKv(const EtcdKv& kv) {
  auto info = ControllerFromValue(kv.value);
  if (!info.ok()) return info.status();
  info->epoch = kv.create_revision;
  return info;
}

}  // namespace pikv::coord
