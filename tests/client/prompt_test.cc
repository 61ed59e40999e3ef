#include "pikv/client/prompt.h"

#include <gtest/gtest.h>

namespace pikv::client {
namespace {

using V = std::vector<int32_t>;

TEST(PromptTest, SplitsOnAMultiTokenSeparator) {
  V sep = {9, 9};
  V tokens = {1, 2, 9, 9, 3, 9, 4, 9, 9, 5, 6, 9, 9, 7};  // a lone 9 is ordinary text
  auto p = ParsePrompt(tokens, sep);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->segments.size(), 4u);
  EXPECT_EQ(p->system(), (V{1, 2}));
  EXPECT_EQ(p->segments[1], (V{3, 9, 4}));
  EXPECT_EQ(p->segments[2], (V{5, 6}));
  EXPECT_EQ(p->question(), (V{7}));
  EXPECT_EQ(p->num_chunks(), 2u);
}

TEST(PromptTest, SeparatorsAtTheEdgesAreErrors) {
  V sep = {9};
  auto start = ParsePrompt(V{9, 1, 9, 2}, sep);
  EXPECT_EQ(start.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(start.status().message().find("system prompt"), std::string::npos);
  auto end = ParsePrompt(V{1, 9, 2, 9}, sep);
  EXPECT_NE(end.status().message().find("question"), std::string::npos);
}

TEST(PromptTest, AdjacentSeparatorsMeanAnEmptyChunk) {
  auto p = ParsePrompt(V{1, 9, 9, 2}, V{9});
  EXPECT_EQ(p.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("chunk 1 is empty"), std::string::npos)
      << p.status().message();
}

TEST(PromptTest, NoSeparatorOrAnEmptyOneIsAnError) {
  auto none = ParsePrompt(V{1, 2, 3}, V{9});
  EXPECT_NE(none.status().message().find("no separator"), std::string::npos);
  EXPECT_EQ(ParsePrompt(V{1, 9, 2}, V{}).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(ParsePrompt(V{1, 9, 2}, V{9}).ok());  // sys and question, no chunks
}

TEST(PromptTest, SeparatorLongerThanTheRestAndPartialMatches) {
  V sep = {7, 8, 9};
  auto p = ParsePrompt(V{7, 8, 1, 7, 8, 9, 2, 7, 8}, sep);  // 7 8 without 9 is text
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->system(), (V{7, 8, 1}));
  EXPECT_EQ(p->question(), (V{2, 7, 8}));
}

TEST(PromptTest, VeryLongPrompts) {
  V tokens;
  const int chunks = 200;
  for (int c = 0; c <= chunks + 1; ++c) {
    if (c) tokens.push_back(-1);
    for (int t = 0; t < 1000; ++t) tokens.push_back(c * 1000 + t);
  }
  auto p = ParsePrompt(tokens, V{-1});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_chunks(), static_cast<size_t>(chunks));
  EXPECT_EQ(p->segments[17].front(), 17000);
}

TEST(PromptTest, FromSegmentsChecksToo) {
  EXPECT_TRUE(FromSegments({{1}, {2}, {3}}).ok());
  EXPECT_EQ(FromSegments({{1}}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(FromSegments({{1}, {}, {3}}).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace pikv::client
