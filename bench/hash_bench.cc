// hash_bench: what verifying a put costs a node's core beside the copy it
// makes anyway, one thread, objects read from memory (the source and
// destination rotate over a pool larger than the caches, as a node's
// received messages and arena space do):
//   memcpy        glibc's copy (the baseline)
//   stream_copy   StreamCopy: the copy the node makes into its arena
//   xxh3          XXH3-64 of the object, pikv's payload checksum
//   hash_then_memcpy       the hash, then a plain copy: a whole put on the
//                 node before issue 56 (verified, then copied into the arena)
//   hash_then_stream_copy  the hash, then StreamCopy: a whole put now
//   copy_in       StreamingPayloadChecksum::CopyIn: the copy and the hash a
//                 1 MiB tile at a time, the tile hashed while in cache (a
//                 streamed put's and a pull's frames)
// Per size, the median of --repeats passes over the pool; GB/s and the
// ratio to memcpy. Prints a table, then one JSON line.
#include <CLI/CLI.hpp>
#include <cstring>
#include <functional>

#include "bench_util.h"
#include "pikv/common/stream_copy.h"
#include "pikv/proto/checksum.h"
#include "pikv/proto/chunk_object.h"

namespace pikv::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Pool {
  Pool(uint64_t object, uint64_t total)
      : size(object), count(std::max<uint64_t>(2, total / object)) {
    src.resize(size * count);
    dst.resize(size * count);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
    std::memset(dst.data(), 1, dst.size());  // faulted in
    // Each object's bytes 12..16 say its payload starts at 512, as a chunk
    // header's do, so CopyIn hashes what XXH3 hashes (less 512 bytes).
    for (uint64_t i = 0; i < count; ++i) {
      uint8_t* o = src.data() + i * size;
      std::memset(o + 12, 0, 4);
      o[13] = 2;
    }
  }
  uint64_t size, count;
  std::vector<uint8_t> src, dst;
};

// GB/s of `op` over every object of the pool, the median of `repeats` passes.
double Measure(Pool& pool, int repeats,
               const std::function<uint64_t(uint8_t*, const uint8_t*, uint64_t)>& op) {
  std::vector<double> rates;
  uint64_t sink = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (uint64_t i = 0; i < pool.count; ++i)
      sink ^= op(pool.dst.data() + i * pool.size, pool.src.data() + i * pool.size, pool.size);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    rates.push_back(static_cast<double>(pool.size * pool.count) / s / 1e9);
  }
  if (sink == 42) std::cerr << "";  // keeps the digests alive
  return Median(rates);
}

int Main(int argc, char** argv) {
  CLI::App app{"hash_bench: XXH3 and the put's copy, per core"};
  std::vector<std::string> sizes{"1MiB", "32MiB", "512MiB"};
  int repeats = 5;
  uint64_t pool_bytes = uint64_t{1} << 30;
  app.add_option("--sizes", sizes, "object sizes (MiB)")->delimiter(',');
  app.add_option("--repeats", repeats);
  app.add_option("--pool", pool_bytes, "bytes the source (and destination) rotate over");
  CLI11_PARSE(app, argc, argv);

  const std::vector<
      std::pair<std::string, std::function<uint64_t(uint8_t*, const uint8_t*, uint64_t)>>>
      ops = {
          {"memcpy",
           [](uint8_t* d, const uint8_t* s, uint64_t n) { return std::memcpy(d, s, n), 0ul; }},
          {"stream_copy",
           [](uint8_t* d, const uint8_t* s, uint64_t n) { return StreamCopy(d, s, n), 0ul; }},
          {"xxh3",
           [](uint8_t*, const uint8_t* s, uint64_t n) {
             return Xxh3({s, n});
           }},
          {"hash_then_memcpy",
           [](uint8_t* d, const uint8_t* s, uint64_t n) {
             const uint64_t digest = Xxh3({s + 512, n - 512});
             std::memcpy(d, s, n);
             return digest;
           }},
          {"hash_then_stream_copy",
           [](uint8_t* d, const uint8_t* s, uint64_t n) {
             const uint64_t digest = Xxh3({s + 512, n - 512});
             StreamCopy(d, s, n);
             return digest;
           }},
          {"copy_in",
           [](uint8_t* d, const uint8_t* s, uint64_t n) {
             StreamingPayloadChecksum sum;
             sum.CopyIn(d, {s, n});
             return sum.Digest();
           }},
      };
  Table table({"size", "op", "GB/s", "vs memcpy"});
  JsonLine json;
  for (const std::string& name : sizes) {
    const uint64_t size = std::stoull(name) << 20;
    Pool pool(size, std::max(pool_bytes, 2 * size));
    double base = 0;
    for (const auto& [op, fn] : ops) {
      const double gbs = Measure(pool, repeats, fn);
      if (op == "memcpy") base = gbs;
      table.Add({name, op, Fixed(gbs, 2), Fixed(gbs / base, 2) + "x"});
      json.Add(name + "_" + op + "_gbps", gbs);
      json.Add(name + "_" + op + "_vs_memcpy", gbs / base);
    }
  }
  table.Print();
  std::cout << json.str() << "\n";
  return 0;
}

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) { return pikv::bench::Main(argc, argv); }
