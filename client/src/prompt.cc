#include "pikv/client/prompt.h"

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
  ChunkedPrompt prompt;
  prompt.segments = std::move(segments);
  return prompt;
}

}  // namespace pikv::client
