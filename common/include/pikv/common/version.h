// pikv's version (the CMake project version) and the git revision it was
// built from ("unknown" outside a git checkout), for --version and logs.
#pragma once

#include <string>
#include <string_view>

namespace pikv {

std::string_view Version();
std::string_view GitRevision();
// "<program> <version> (git <revision>)"
inline std::string VersionLine(std::string_view program) {
  return std::string(program) + " " + std::string(Version()) + " (git " +
         std::string(GitRevision()) + ")";
}

}  // namespace pikv
