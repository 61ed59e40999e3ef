// An enum's names, written once as a table beside the enum: NameOf prints a
// value, ValueOf parses a name from a file, a flag or a peer. A value may
// have several names (aliases accepted when parsing); the first is printed.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace pikv {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// `unknown` for a value the table lacks (a newer peer's, or a cast number).
template <typename E, size_t N>
constexpr const char* NameOf(const EnumName<E> (&names)[N], E value, const char* unknown = "?") {
  for (const EnumName<E>& n : names) {
    if (n.value == value) return n.name;
  }
  return unknown;
}

template <typename E, size_t N>
constexpr std::optional<E> ValueOf(const EnumName<E> (&names)[N], std::string_view name) {
  for (const EnumName<E>& n : names) {
    if (name == n.name) return n.value;
  }
  return std::nullopt;
}

}  // namespace pikv
