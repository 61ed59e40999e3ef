#include "pikv/common/split.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace pikv {
namespace {

using Items = std::vector<std::string_view>;

// Empty items are kept, so that a caller can refuse "a,,b" or a trailing
// comma rather than read it as a shorter list.
TEST(SplitListTest, KeepsEveryItemIncludingEmptyOnes) {
  EXPECT_EQ(SplitList(""), Items({""}));
  EXPECT_EQ(SplitList("a"), Items({"a"}));
  EXPECT_EQ(SplitList("a,bc"), Items({"a", "bc"}));
  EXPECT_EQ(SplitList("a,,b"), Items({"a", "", "b"}));
  EXPECT_EQ(SplitList(",a,"), Items({"", "a", ""}));
  EXPECT_EQ(SplitList("x|y", '|'), Items({"x", "y"}));
}

}  // namespace
}  // namespace pikv
