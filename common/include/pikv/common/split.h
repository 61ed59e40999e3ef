#pragma once

#include <string_view>
#include <vector>

namespace pikv {

// The items of a `sep`-separated list, empty ones kept: "" is one empty item
// and "a,,b" three, so each caller decides whether an empty item is an error.
// The views point into `list`.
std::vector<std::string_view> SplitList(std::string_view list, char sep = ',');

}  // namespace pikv
