// Objects over Redis's bulk limit (proto-max-bulk-len, 512 MB by default) are
// stored as parts: `<key>:part:<generation>:<i>`, each at most part_bytes,
// written first with an orphan TTL, then the manifest at `<key>` and the
// parts' final expiry in one MULTI/EXEC. A reader that finds a manifest
// sees every part (or misses); a write cut before EXEC leaves no visible
// object, and its parts expire. The manifest is text, parsed strictly (what
// Redis holds is not trusted): "PIKVPART <generation hex> <size> <part_bytes> <parts>".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pikv::storage {

struct PartsManifest {
  uint64_t generation = 0;  // random per write: concurrent writers never mix parts
  uint64_t size = 0;        // the whole object's bytes
  uint64_t part_bytes = 0;
  uint32_t parts = 0;
};

inline constexpr std::string_view kPartsMagic = "PIKVPART";
inline constexpr uint64_t kMaxPartedObjectBytes = 1ull << 40;
inline constexpr uint32_t kMaxParts = 1u << 16;
inline constexpr size_t kMaxManifestBytes = 128;

std::string EncodeManifest(const PartsManifest& m);
// nullopt unless `value` is a well-formed manifest whose counts agree.
std::optional<PartsManifest> ParseManifest(std::string_view value);
std::string PartKey(const std::string& key, const PartsManifest& m, uint32_t index);

}  // namespace pikv::storage
