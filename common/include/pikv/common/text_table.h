// TextTable: aligned columns for human output (CLI tables, benchmark reports).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pikv {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> columns) : columns_(std::move(columns)) {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  size_t rows() const { return rows_.size(); }
  // First column left-aligned, the rest right-aligned; a rule under the header.
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace pikv
