#include "pikv/coord/etcd_client.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "pikv/common/split.h"
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

namespace {

enum class Scheme { kAny, kHttp, kHttps };

// One "[scheme://]host:port[/]" entry: host:port, or an error.
Result<std::string> HostPort(std::string_view e, Scheme& scheme) {
  Scheme said = Scheme::kAny;
  if (e.substr(0, 7) == "http://") {
    said = Scheme::kHttp;
    e.remove_prefix(7);
  } else if (e.substr(0, 8) == "https://") {
    said = Scheme::kHttps;
    e.remove_prefix(8);
  }
  if (said != Scheme::kAny) {
    if (scheme != Scheme::kAny && scheme != said)
      return InvalidArgument("etcd endpoints mix http and https");
    scheme = said;
  }
  if (!e.empty() && e.back() == '/') e.remove_suffix(1);
  const size_t colon = e.rfind(':');
  int port = 0;
  const std::string_view host = colon == std::string_view::npos ? e : e.substr(0, colon);
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  const bool host_ok = !host.empty() && host.find_first_of("/@ ?#") == std::string_view::npos &&
                       (bracketed || host.find_first_of("[]:") == std::string_view::npos);
  if (colon == std::string_view::npos || !host_ok ||
      std::from_chars(e.data() + colon + 1, e.data() + e.size(), port).ec != std::errc() ||
      port <= 0 || port > 65535 || std::to_string(port) != e.substr(colon + 1)) {
    return InvalidArgument("etcd endpoint is not host:port: '" + std::string(e) + "'");
  }
  return std::string(e);
}

}  // namespace

Result<EtcdAccess> EtcdAccess::Parse(std::string_view list, const std::string& tls_dir) {
  EtcdAccess access;
  Scheme scheme = Scheme::kAny;
  for (std::string_view endpoint : SplitList(list)) {
    auto e = HostPort(endpoint, scheme);
    if (!e.ok()) return e.status();
    access.endpoints.push_back(std::move(*e));
  }
  if (tls_dir.empty() && scheme == Scheme::kHttps)
    return InvalidArgument("etcd over https needs its TLS files (etcd-tls)");
  if (!tls_dir.empty()) {
    if (scheme == Scheme::kHttp)
      return InvalidArgument("etcd endpoints say http but TLS files are given");
    access.tls = TlsFiles::InDir(tls_dir);
    if (Status s = access.tls.Check(); !s.ok()) return s;
  }
  return access;
}

std::string EtcdAccess::Url(size_t member, const std::string& path) const {
  return (tls.enabled() ? "https://" : "http://") + endpoints[member] + path;
}

EtcdClient::EtcdClient(EtcdAccess access, std::chrono::milliseconds timeout)
    : access_(std::move(access)), timeout_(timeout), http_(access_.tls) {}

Result<std::vector<std::string>> EtcdClient::ParseEndpoints(std::string_view list) {
  auto access = EtcdAccess::Parse(list);
  if (!access.ok()) return access.status();
  return std::move(access->endpoints);
}

Result<std::string> EtcdClient::Call(const std::string& path, const std::string& body) {
  using std::chrono::milliseconds;
  const size_t n = access_.endpoints.size();
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  Status last = Unavailable("etcd: no endpoints");
  const size_t first = preferred_;
  for (size_t tried = 0; tried < n; ++tried) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Timeout("etcd: no answer within " + std::to_string(timeout_.count()) + " ms (" +
                     last.message() + ")");
    const size_t i = (first + tried) % n;
    // A member that is down fails at once and the next one is asked; one
    // that hangs (paused, cut off) may take what is left of this call, and
    // the next call starts past it.
    auto r = http_.Post(access_.Url(i, path), body, left);
    if (r.ok() && r->status == 200) {
      preferred_ = i;
      return std::move(r->body);
    }
    if (!r.ok() && r.status().code() == ErrorCode::kTimeout) preferred_ = (i + 1) % n;
    last = r.ok() ? Unavailable("etcd " + access_.Url(i, path) + ": HTTP " +
                                std::to_string(r->status) + " " + r->body.substr(0, 200))
                  : Status(r.status().code(), "etcd " + r.status().message());
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
