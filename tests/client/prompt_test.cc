#include "pikv/client/prompt.h"

#include <gtest/gtest.h>

namespace pikv::client {
namespace {

using V = std::vector<int32_t>;

TEST(PromptTest, FromSegmentsChecksTheShapeAndNamesTheEmptySegment) {
  auto p = FromSegments({{1, 2}, {9, 3}, {9, 4}, {9, 5}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_chunks(), 2u);
  EXPECT_EQ(p->system(), (V{1, 2}));
  EXPECT_EQ(p->question(), (V{9, 5}));
  EXPECT_EQ(p->Lengths(), (std::vector<uint32_t>{2, 2, 2, 2}));
  EXPECT_TRUE(FromSegments({{1}, {3}}).ok()) << "a system prompt and a question, no chunks";
  EXPECT_EQ(FromSegments({{1}}).code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(FromSegments({{}, {3}}).status().message().find("system prompt"), std::string::npos);
  EXPECT_NE(FromSegments({{1}, {}}).status().message().find("question"), std::string::npos);
  EXPECT_NE(FromSegments({{1}, {}, {3}}).status().message().find("chunk 1 is empty"),
            std::string::npos);
}

}  // namespace
}  // namespace pikv::client
