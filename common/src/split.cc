#include "pikv/common/split.h"

namespace pikv {

std::vector<std::string_view> SplitList(std::string_view list, char sep) {
  std::vector<std::string_view> items;
  for (size_t pos = 0;;) {
    const size_t end = std::min(list.find(sep, pos), list.size());
    items.push_back(list.substr(pos, end - pos));
    if (end == list.size()) return items;
    pos = end + 1;
  }
}

}  // namespace pikv
