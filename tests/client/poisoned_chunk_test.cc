// Content-verified objects: a key is the hash of a chunk's namespace and
// tokens, and an object must be what its key says. A real node refuses a put
// of an object filed under a key its own header does not hash to (other
// tokens, model, RoPE, dtype); an honest store of that key then lands and is
// served. What the key cannot say (the geometry a model id implies) the
// client checks against its own namespace before remapping anything.
#include <gtest/gtest.h>

#include <cstring>

#include "pikv/client/client.h"
#include "pikv/client/prompt.h"
#include "pikv/rpc/node_client.h"
#include "small_namespace.h"
#include "test_support.h"

namespace pikv::client {
namespace {

constexpr auto kTimeout = std::chrono::seconds(10);

class PoisonedChunkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    node_ = testing::StartNode({"--endpoint", "ipc://" + dir_.str() + "/n.sock", "--data-dir",
                                dir_.str(), "--controller", "", "--log-level", "error"});
    client_ = std::make_unique<Client>(SmallNamespace(node_.ipc));
    // The honest object of `tokens_`, built by a client with no node.
    Client builder(SmallNamespace(""));
    payload_.assign(2 * 2 * tokens_.size() * 2 * 64 * 2, 0);
    for (size_t i = 0; i < payload_.size(); ++i) payload_[i] = static_cast<uint8_t>(i % 7 + 1);
    key_ = builder.KeyOf(tokens_);
    builder.Store(key_, tokens_, 0, payload_, &honest_).IgnoreError();
    ASSERT_TRUE(VerifyChunkObject(honest_.span(), &key_).ok());
  }
  Status PutRaw(const SharedBuffer& object) {
    rpc::NodeClient node(node_.ipc, kTimeout);
    auto put = node.Put({&key_, 1}, {&object, 1});
    return put.ok() ? (*put)[0] : put.status();
  }
  int64_t NodeStat(const std::string& name) {
    rpc::NodeClient node(node_.ipc, kTimeout);
    auto s = node.Stats();
    return s.ok() ? FieldInt(*s, name, -1) : -1;
  }

  testing::TempDir dir_;
  testing::NodeProcess node_;
  std::unique_ptr<Client> client_;
  std::vector<int32_t> tokens_ = {5, 6, 7, 8, 9};
  std::vector<uint8_t> payload_;
  ChunkKey key_;
  SharedBuffer honest_;
};

TEST_F(PoisonedChunkTest, APoisonedPutIsRefusedAndAnHonestStoreThenLands) {
  const std::vector<std::pair<std::string, std::function<void(ChunkHeader&)>>> poisons = {
      {"other tokens", [](ChunkHeader& h) { h.tokens[0] = 99; }},
      {"other model", [](ChunkHeader& h) { h.model_id = "another-model"; }},
      {"other RoPE", [](ChunkHeader& h) { h.rope_spec = "neox;rotary_dim=64;theta=500000"; }},
      {"other dtype", [](ChunkHeader& h) { h.geometry.dtype = DType::kF16; }},
      {"other attention mode",
       [](ChunkHeader& h) {
         h.attention_mode = AttentionMode::kPrefixed;
         h.sys_key = ChunkKey{1, 2};
       }},
  };
  for (const auto& [what, poison] : poisons) {
    Status s = PutRaw(testing::Rebuilt(honest_.span(), poison));
    EXPECT_EQ(s.code(), ErrorCode::kCorruption) << what << ": " << s.ToString();
  }
  EXPECT_EQ(NodeStat("storage.put_rejects"), int64_t(poisons.size()));
  EXPECT_EQ(NodeStat("cpu.entries"), 0);
  // The honest store is not shadowed by anything the poisoned ones left.
  ASSERT_TRUE(client_->Store(key_, tokens_, 0, payload_).ok());
  auto plan = client_->MakePlan(*FromSegments({tokens_, {1}}));
  ASSERT_EQ(plan.chunks[0].source, Source::kLocal);
  auto objects = client_->Fetch(plan);
  ASSERT_TRUE(objects[0].ok());
  EXPECT_EQ(0, std::memcmp(objects[0]->data(), honest_.data(), honest_.size()));
}

TEST_F(PoisonedChunkTest, AStoreUnderAKeyThatIsNotTheChunksIsRefusedBeforeItLeaves) {
  const ChunkKey other = client_->KeyOf(std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(client_->Store(other, tokens_, 0, payload_).code(), ErrorCode::kInvalidArgument);
  const ChunkKey sys = client_->KeyOf(std::vector<int32_t>{4});  // isolated mode: no sys key
  EXPECT_EQ(client_->Store(key_, tokens_, 0, payload_, nullptr, {.sys_key = sys}).code(),
            ErrorCode::kOk);
  EXPECT_EQ(client_->Stats().store_failures, 1u);
  // A scope is part of the key: the same tokens' key outside it is refused in it.
  const client::KeyContext scoped{.sys_key = std::nullopt, .scope = ChunkKey{7, 7}};
  EXPECT_EQ(client_->Store(key_, tokens_, 0, payload_, nullptr, scoped).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(client_->Stats().store_failures, 2u);
  EXPECT_EQ(NodeStat("storage.put_rejects"), 0);
}

// Geometry is not in the key (the model id implies it), so a node cannot tell
// an object of the model's real geometry from another; the client can: such
// an object is refused before one byte reaches the engine's cache.
TEST_F(PoisonedChunkTest, AnObjectOfAnotherGeometryIsRefusedBeforeTheRemap) {
  ASSERT_TRUE(PutRaw(testing::Rebuilt(honest_.span(), [](ChunkHeader& h) {
                h.geometry.num_layers = 1;
              })).ok());
  auto plan = client_->MakePlan(*FromSegments({tokens_, {1}}));
  ASSERT_EQ(plan.chunks[0].source, Source::kLocal);
  auto objects = client_->Fetch(plan);
  ASSERT_TRUE(objects[0].ok());
  auto layout = device::PagedLayout::Make(device::PagedLayout::Order::kFlash, DType::kBF16,
                                          KvFormat::kStandard, 2, 64, 16, 1);
  std::vector<std::vector<uint8_t>> memory(2, std::vector<uint8_t>(layout.ElementsPerLayer() * 2));
  for (auto& m : memory) layout.layers.push_back(m.data());
  const std::vector<int64_t> slots = {0, 1, 2, 3, 4};
  Status s = client_->Remap(*objects[0], plan.chunks[0], slots, layout);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("geometry"), std::string::npos) << s.ToString();
  EXPECT_EQ(client_->Stats().corrupt, 1u);
  for (const auto& m : memory)
    EXPECT_TRUE(std::all_of(m.begin(), m.end(), [](uint8_t b) { return b == 0; }));
}

}  // namespace
}  // namespace pikv::client
