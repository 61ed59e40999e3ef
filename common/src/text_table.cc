#include "pikv/common/text_table.h"

namespace pikv {

void TextTable::Print(std::ostream& out) const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], c < row.size() ? row[c].size() : 0);
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < columns_.size(); ++c) {
      std::string cell = c < cells.size() ? cells[c] : "";
      s += c == 0 ? cell + std::string(width[c] - cell.size(), ' ')
                  : "  " + std::string(width[c] - cell.size(), ' ') + cell;
    }
    out << s << "\n";
  };
  line(columns_);
  std::string rule;
  for (size_t c = 0; c < columns_.size(); ++c) rule += std::string(width[c] + (c ? 2 : 0), '-');
  out << rule << "\n";
  for (const auto& row : rows_) line(row);
  out.flush();
}

}  // namespace pikv
