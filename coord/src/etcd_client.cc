#include "pikv/coord/etcd_client.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "pikv/coord/http_post.h"

namespace pikv::coord {

namespace {

using json = nlohmann::json;

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<uint8_t>(in[i + 2]);
    out += kBase64[v >> 18 & 63];
    out += kBase64[v >> 12 & 63];
    out += i + 1 < in.size() ? kBase64[v >> 6 & 63] : '=';
    out += i + 2 < in.size() ? kBase64[v & 63] : '=';
  }
  return out;
}

std::optional<std::string> Unbase64(std::string_view in) {
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const char* p = std::char_traits<char>::find(kBase64, 64, c);
    if (!p) return std::nullopt;
    v = v << 6 | static_cast<uint32_t>(p - kBase64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(v >> bits & 0xff);
    }
  }
  return out;
}

// The key just past every key that starts with `prefix` (etcd's range_end).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<uint8_t>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::string(1, '\0');
  prefix.back() = static_cast<char>(static_cast<uint8_t>(prefix.back()) + 1);
  return prefix;
}

// grpc-gateway writes int64 as a string; absent means 0.
std::optional<int64_t> Int(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return std::nullopt;
  const auto& s = it->get_ref<const std::string&>();
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A boolean member; false when absent or of another type (value() would throw).
bool Bool(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

Result<json> Parse(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return ProtocolError("etcd: the answer is not a JSON object");
  return j;
}

Result<EtcdKv> KvOf(const json& j) {
  EtcdKv kv;
  auto key = j.is_object() && j.contains("key") && j["key"].is_string()
                 ? Unbase64(j["key"].get<std::string>())
                 : std::nullopt;
  auto value = j.is_object() && j.contains("value") && j["value"].is_string()
                   ? Unbase64(j["value"].get<std::string>())
                   : std::optional<std::string>("");
  auto created = j.is_object() ? Int(j, "create_revision") : std::nullopt;
  auto lease = j.is_object() ? Int(j, "lease") : std::nullopt;
  if (!key || !value || !created || !lease) return ProtocolError("etcd: a malformed key-value");
  kv.key = std::move(*key);
  kv.value = std::move(*value);
  kv.create_revision = *created;
  kv.lease = *lease;
  return kv;
}

json PutOp(const std::string& key, const std::string& value, int64_t lease) {
  return {{"requestPut",
           {{"key", Base64(key)}, {"value", Base64(value)}, {"lease", std::to_string(lease)}}}};
}

}  // namespace

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {}

Result<std::vector<std::string>> EtcdClient::ParseEndpoints(std::string_view list) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= list.size();) {
    const size_t end = std::min(list.find(',', pos), list.size());
    std::string_view e = list.substr(pos, end - pos);
    pos = end + 1;
    if (e.substr(0, 7) == "http://") e.remove_prefix(7);
    if (!e.empty() && e.back() == '/') e.remove_suffix(1);
    const size_t colon = e.rfind(':');
    int port = 0;
    if (colon == std::string_view::npos || colon == 0 ||
        std::from_chars(e.data() + colon + 1, e.data() + e.size(), port).ec != std::errc() ||
        port <= 0 || port > 65535 || e.find_first_of("/@ ") != std::string_view::npos) {
      return InvalidArgument("etcd endpoint is not host:port: '" + std::string(e) + "'");
    }
    out.emplace_back(e);
  }
  return out;
}

Result<std::string> EtcdClient::Call(const std::string& path, const std::string& body) {
  Status last = Unavailable("etcd: no endpoints");
  for (size_t tried = 0; tried < endpoints_.size(); ++tried) {
    const size_t i = (preferred_ + tried) % endpoints_.size();
    auto r = Post(endpoints_[i], path, body, timeout_);
    if (r.ok() && r->status == 200) {
      preferred_ = i;
      return std::move(r->body);
    }
    last = r.ok()
               ? Unavailable("etcd " + endpoints_[i] + path + ": HTTP " +
                             std::to_string(r->status) + " " + r->body.substr(0, 200))
               : Status(r.status().code(), "etcd " + endpoints_[i] + ": " + r.status().message());
  }
  return last;
}

Result<int64_t> EtcdClient::GrantLease(int64_t ttl_seconds) {
  auto body = Call("/v3/lease/grant", json{{"TTL", std::to_string(ttl_seconds)}}.dump());
  if (!body.ok()) return body.status();
  auto j = Parse(*body);
  if (!j.ok()) return j.status();
  auto id = Int(*j, "ID");
  if (!id || *id == 0) return ProtocolError("etcd: lease grant without an ID");
  return *id;
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  auto body = Call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump());
  if (!body.ok()) return body.status();
  // A stream of one result: {"result": {"ID": ..., "TTL": ...}}; TTL absent = expired.
  auto j = Parse(*body);
  if (!j.ok()) return j.status();
  auto it = j->find("result");
  if (it == j->end() || !it->is_object()) return ProtocolError("etcd: keepalive without a result");
  auto ttl = Int(*it, "TTL");
  if (!ttl) return ProtocolError("etcd: keepalive with a bad TTL");
  return std::max<int64_t>(*ttl, 0);
}

Status EtcdClient::Revoke(int64_t lease) {
  auto body = Call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  return body.ok() ? Status::Ok() : body.status();
}

Result<std::optional<int64_t>> EtcdClient::CreateIfAbsent(const std::string& key,
                                                          const std::string& value, int64_t lease) {
  json txn = {{"compare", json::array({{{"target", "CREATE"},
                                        {"key", Base64(key)},
                                        {"result", "EQUAL"},
                                        {"createRevision", "0"}}})},
              {"success", json::array({PutOp(key, value, lease)})}};
  auto body = Call("/v3/kv/txn", txn.dump());
  if (!body.ok()) return body.status();
  auto j = Parse(*body);
  if (!j.ok()) return j.status();
  if (!Bool(*j, "succeeded")) return std::optional<int64_t>();
  auto header = j->find("header");
  auto revision =
      header != j->end() && header->is_object() ? Int(*header, "revision") : std::nullopt;
  if (!revision || *revision <= 0) return ProtocolError("etcd: txn without a revision");
  return std::optional<int64_t>(*revision);
}

Result<bool> EtcdClient::PutIfCreated(const std::string& key, const std::string& value,
                                      int64_t lease, int64_t revision) {
  json txn = {{"compare", json::array({{{"target", "CREATE"},
                                        {"key", Base64(key)},
                                        {"result", "EQUAL"},
                                        {"createRevision", std::to_string(revision)}}})},
              {"success", json::array({PutOp(key, value, lease)})}};
  auto body = Call("/v3/kv/txn", txn.dump());
  if (!body.ok()) return body.status();
  auto j = Parse(*body);
  if (!j.ok()) return j.status();
  return Bool(*j, "succeeded");
}

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  auto body = Call("/v3/kv/put", PutOp(key, value, lease)["requestPut"].dump());
  return body.ok() ? Status::Ok() : body.status();
}

Result<std::optional<EtcdKv>> EtcdClient::Get(const std::string& key, bool serializable) {
  json range = {{"key", Base64(key)}};
  if (serializable) range["serializable"] = true;
  auto body = Call("/v3/kv/range", range.dump());
  if (!body.ok()) return body.status();
  auto j = Parse(*body);
  if (!j.ok()) return j.status();
  auto kvs = j->find("kvs");
  if (kvs == j->end() || !kvs->is_array() || kvs->empty()) return std::optional<EtcdKv>();
  auto kv = KvOf(kvs->front());
  if (!kv.ok()) return kv.status();
  return std::optional<EtcdKv>(std::move(*kv));
}

Result<std::vector<EtcdKv>> EtcdClient::List(const std::string& prefix, int64_t limit) {
  auto body = Call("/v3/kv/range", json{{"key", Base64(prefix)},
                                        {"range_end", Base64(PrefixEnd(prefix))},
                                        {"limit", std::to_string(limit)}}
                                       .dump());
  if (!body.ok()) return body.status();
  auto j = Parse(*body);
  if (!j.ok()) return j.status();
  std::vector<EtcdKv> out;
  auto kvs = j->find("kvs");
  if (kvs == j->end()) return out;
  if (!kvs->is_array()) return ProtocolError("etcd: kvs is not an array");
  for (const auto& e : *kvs) {
    auto kv = KvOf(e);
    if (!kv.ok()) return kv.status();
    out.push_back(std::move(*kv));
  }
  return out;
}

}  // namespace pikv::coord
