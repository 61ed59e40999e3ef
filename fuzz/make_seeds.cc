// Writes the seed corpus (fuzz/corpus/<target>/) from real messages, objects
// and configs. Run by hand after a format change: build/bin/fuzz_make_seeds fuzz/corpus
#include <filesystem>
#include <fstream>
#include <iostream>

#include "pikv/proto/data_wire.h"
#include "pikv/proto/message.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace pikv;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

Header Make(MsgType type, std::vector<ChunkKey> keys = {}, Fields fields = {},
            std::vector<int64_t> values = {}) {
  Header h;
  h.type = type;
  h.request_id = 7;
  h.keys = std::move(keys);
  h.fields = std::move(fields);
  h.values = std::move(values);
  return h;
}

std::string NodeRequest(const Header& h, const std::vector<SharedBuffer>& payloads) {
  const std::string header = EncodeHeader(h);
  std::string out;
  out += static_cast<char>(payloads.size());
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (const auto& p : payloads) out.append(reinterpret_cast<const char*>(p.data()), p.size());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_make_seeds <corpus dir>\n";
    return 2;
  }
  const fs::path root = argv[1];
  auto o = testing::MakeObject(1, 2048);
  const std::string object(reinterpret_cast<const char*>(o.bytes.data()), o.bytes.size());
  const ChunkKey k = o.key, k2{1, 2};
  const Fields node{{"node_id", std::string("node-a")}, {"incarnation", int64_t{1}}};
  auto with = [&](Fields extra) {
    Fields f = node;
    f.insert(extra.begin(), extra.end());
    return f;
  };

  Write(root / "chunk_object", "object", object);
  Write(root / "chunk_object", "truncated", object.substr(0, object.size() / 2));

  const std::vector<Header> controller = {
      Make(MsgType::kRegister, {},
           with({{"host", std::string("host-a")},
                 {"tcp", std::string("tcp://127.0.0.1:7400")},
                 {"ipc", std::string("ipc:///tmp/a.sock")},
                 {"cpu_capacity", int64_t{1} << 30}})),
      Make(MsgType::kHeartbeat, {},
           with({{"requests", int64_t{10}}, {"cpu.used_bytes", int64_t{5}}})),
      Make(MsgType::kEvents, {k, k2}, with({{"seq", int64_t{1}}}), {17, 33}),
      Make(MsgType::kInventory, {k, k2},
           with({{"seq", int64_t{0}}, {"part", int64_t{0}}, {"final", int64_t{1}}}), {0, 1}),
      Make(MsgType::kDeregister, {}, node),
      Make(MsgType::kLocate, {k, k2}, {{"host", std::string("host-a")}, {"json", int64_t{1}}}),
      Make(MsgType::kAdminNodes),
      Make(MsgType::kAdminStats),
      Make(MsgType::kAdminHealth),
      Make(MsgType::kAdminClear, {}, {{"node_id", std::string("node-a")}}),
      Make(MsgType::kAdminPin, {k}),
      Make(MsgType::kAdminEvict, {k})};
  for (size_t i = 0; i < controller.size(); ++i) {
    const std::string name(MsgTypeName(controller[i].type));
    Write(root / "controller_request", name, EncodeHeader(controller[i]));
    Write(root / "wire_header", name, EncodeHeader(controller[i]));
  }
  Header locate_reply =
      Make(MsgType::kLocate, {},
           {{"n1.id", std::string("a")}, {"n1.tcp", std::string("tcp://h:1")}}, {1, 4, 0});
  Write(root / "wire_header", "locate_reply", EncodeHeader(locate_reply));

  Header pull = Make(MsgType::kPull, {k});
  EncodePull({"tcp://127.0.0.1:7400", 5, false}, pull);
  const std::vector<std::pair<Header, std::vector<SharedBuffer>>> node_requests = {
      {Make(MsgType::kPut, {k}), {o.bytes}}, {Make(MsgType::kGet, {k, k2}), {}},
      {Make(MsgType::kExists, {k, k2}), {}}, {Make(MsgType::kPin, {k}), {}},
      {Make(MsgType::kUnpin, {k}), {}},      {Make(MsgType::kDelete, {k}), {}},
      {Make(MsgType::kStats), {}},           {Make(MsgType::kPing), {}},
      {Make(MsgType::kClear), {}},           {pull, {}}};
  for (const auto& [h, payloads] : node_requests)
    Write(root / "node_request", std::string(MsgTypeName(h.type)), NodeRequest(h, payloads));

  Write(root / "config_yaml", "node",
        "endpoint: [tcp://0.0.0.0:7400, ipc:///run/pikv/node.sock]\nnode-id: node-a\n"
        "cpu-capacity: 64GiB\nheartbeat-interval: 500ms\nworkers: 4\ndisk: false\n");
  Write(
      root / "model_config", "llama3",
      R"({"hidden_size":4096,"num_attention_heads":32,"num_key_value_heads":8,"rope_theta":500000.0,)"
      R"("rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,)"
      R"("high_freq_factor":4.0,"original_max_position_embeddings":8192}})");
  Write(
      root / "model_config", "yarn",
      R"({"head_dim":64,"rope_scaling":{"type":"yarn","factor":4.0,"original_max_position_embeddings":4096}})");
  Write(
      root / "model_config", "phi2",
      R"({"hidden_size":2560,"num_attention_heads":32,"partial_rotary_factor":0.4,"rope_theta":10000})");
  Write(root / "model_config", "gemma3",
        R"({"model_type":"gemma3","torch_dtype":"bfloat16","text_config":{"model_type":)"
        R"("gemma3_text","num_hidden_layers":12,"sliding_window":512,"rope_scaling":)"
        R"({"rope_type":"linear","factor":8.0},"layer_types":["sliding_attention",)"
        R"("full_attention"]}})");
  Write(root / "model_config", "llama4",
        R"({"model_type":"llama4_text","num_hidden_layers":8,"head_dim":128,)"
        R"("num_attention_heads":40,"num_key_value_heads":8,"torch_dtype":"bfloat16",)"
        R"("no_rope_layers":[1,1,1,0,1,1,1,0],"attention_chunk_size":8192})");
  Write(root / "http_request", "locate",
        "GET /locate?key=0123456789abcdef0123456789abcdef&host=h%201 HTTP/1.1\r\nHost: x\r\n\r\n");
  Write(root / "http_request", "healthz", "HEAD /healthz HTTP/1.0\r\n\r\n");
  Write(root / "http_request", "endpoint", "tcp://[::1]:7400");
  std::cout << "seeds written under " << root << "\n";
  return 0;
}
