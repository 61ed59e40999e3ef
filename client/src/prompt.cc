#include "pikv/client/prompt.h"

#include <algorithm>

namespace pikv::client {

std::vector<uint32_t> ChunkedPrompt::Lengths() const {
  std::vector<uint32_t> out;
  for (const auto& s : segments) out.push_back(static_cast<uint32_t>(s.size()));
  return out;
}

Result<ChunkedPrompt> FromSegments(std::vector<std::vector<int32_t>> segments) {
  if (segments.size() < 2)
    return InvalidArgument("a chunked prompt needs a system prompt and a question");
  for (size_t i = 0; i < segments.size(); ++i) {
    if (!segments[i].empty()) continue;
    if (i == 0) return InvalidArgument("the system prompt is empty");
    if (i + 1 == segments.size())
      return InvalidArgument("the question is empty (missing question?)");
    return InvalidArgument("chunk " + std::to_string(i) + " is empty (two adjacent separators?)");
  }
  return ChunkedPrompt{std::move(segments)};
}

Result<ChunkedPrompt> ParsePrompt(std::span<const int32_t> tokens,
                                  std::span<const int32_t> separator) {
  if (separator.empty()) return InvalidArgument("the separator is empty");
  std::vector<std::vector<int32_t>> segments(1);
  size_t i = 0;
  while (i < tokens.size()) {
    if (i + separator.size() <= tokens.size() &&
        std::equal(separator.begin(), separator.end(),
                   tokens.begin() + static_cast<ptrdiff_t>(i))) {
      segments.emplace_back();
      i += separator.size();
    } else {
      segments.back().push_back(tokens[i++]);
    }
  }
  if (segments.size() < 2) {
    return InvalidArgument("no separator in the prompt: expected sys SEP chunk ... SEP question");
  }
  return FromSegments(std::move(segments));
}

}  // namespace pikv::client
