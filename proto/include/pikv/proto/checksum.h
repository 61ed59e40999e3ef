// Xxh3: the XXH3-64 checksum of chunk payloads, at the speed this CPU allows.
//
// Every payload byte pikv admits, pulls or builds is hashed, so this is on
// the path of every large transfer. Debian's libxxhash is built for SSE2
// (5.3 GB/s over 512 MiB on this project's 2-core machines); where the CPU
// has AVX2 the same function compiled for it is picked at run time (7.4 GB/s
// there). The digests are XXH3's either way.
// Thread-safety: Xxh3 is pure; an Xxh3Stream belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace pikv {

uint64_t Xxh3(std::span<const uint8_t> bytes);

// Xxh3 of bytes given in pieces.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void Update(std::span<const uint8_t> bytes);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pikv
