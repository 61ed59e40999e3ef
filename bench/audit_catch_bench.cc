// audit_catch_bench: what an audit flags, under the old rule and the new.
//
// Old rule (before like with like): each (layer, K|V) block's largest
// difference relative to its largest value, against 4 steps of the dtype
// (f32: 1e-3), the two payloads compared as they are (positions ignored).
// New rule: client::CompareWithRecomputed (audit_rule.h).
//
// Honest rows: a writer and an auditor of different kernels (fp32 FMA in
// order, fp32 no-FMA reversed, double accumulation; tests/support/honest_kv)
// compute the same chunk; the writer at the row's position, the auditor
// alone at 0. Any flag there is a false accusation.
// Poison rows: the writer's payload (stored at 0, so the old rule is judged
// where it can be right) changed one way; the auditor recomputes it with
// another kernel. The new rule is also shown with the object at 1000.
// Each cell is the share of --trials seeds flagged. Prints a table, then one
// JSON line.
#include <CLI/CLI.hpp>
#include <cmath>
#include <functional>
#include <iomanip>
#include <iostream>
#include <random>

#include "bench_util.h"
#include "honest_kv.h"
#include "pikv/client/audit_rule.h"
#include "pikv/proto/chunk_object.h"

namespace pikv::bench {
namespace {

using testing::Element;
using testing::HonestChunk;
using testing::HonestKernel;
using testing::HonestPayload;
using testing::SetElement;
using Payload = std::vector<uint8_t>;

constexpr HonestChunk kChunk{4, 16, 4, 64, 256, 0};

size_t BlockSize() { return size_t{kChunk.tokens} * kChunk.kv_heads * kChunk.head_dim; }
size_t Blocks() { return size_t{kChunk.layers} * 2; }

bool OldRuleFlags(const Payload& a, const Payload& b, DType dtype) {
  const double tolerance = dtype == DType::kBF16  ? 4 * 0x1p-8
                           : dtype == DType::kF16 ? 4 * 0x1p-11
                                                  : 1e-3;
  for (size_t block = 0; block < Blocks(); ++block) {
    double diff = 0, scale = 0;
    for (size_t i = block * BlockSize(); i < (block + 1) * BlockSize(); ++i) {
      const float x = Element(a, dtype, i), y = Element(b, dtype, i);
      if (std::isfinite(x) != std::isfinite(y)) return true;
      diff = std::max(diff, std::fabs(double{x} - y));
      scale = std::max(scale, std::fabs(double{y}));
    }
    if (diff > 0 && (scale == 0 || diff / scale > tolerance)) return true;
  }
  return false;
}

Payload Object(const device::RopeSpec& rope, DType dtype, int64_t virtual_start,
               const Payload& payload) {
  ChunkHeader h;
  h.model_id = "bench";
  h.geometry = {kChunk.layers,   kChunk.tokens, kChunk.kv_heads,
                kChunk.head_dim, dtype,         KvFormat::kStandard};
  device::SetHeaderRope(rope, h);
  h.virtual_start = virtual_start;
  h.tokens.assign(kChunk.tokens, 1);
  h.key = KeyOfContent(h);
  return *BuildChunkObject(h, payload);
}

// The new rule's score: its worst element or block in units of its
// tolerance (above 1 flags).
double NewRuleScore(const device::RopeSpec& rope, DType dtype, int64_t virtual_start,
                    const Payload& stored, const Payload& recomputed) {
  auto f =
      client::CompareWithRecomputed(Object(rope, dtype, virtual_start, stored), recomputed, rope);
  return f.ok() ? std::max(f->worst, f->worst_l2) : INFINITY;
}

// A poisoning: changes the payload, drawing what it touches from `rng`.
using Poison = std::function<void(Payload&, DType, std::mt19937_64&)>;

size_t AnyBlock(std::mt19937_64& rng) { return rng() % Blocks() * BlockSize(); }

void SmallValues(Payload& p, DType dtype, std::mt19937_64& rng) {
  // Values under 1/256 of the block's largest, negated and doubled.
  const size_t begin = AnyBlock(rng), end = begin + BlockSize();
  float largest = 0;
  for (size_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(Element(p, dtype, i)));
  for (size_t i = begin; i < end; ++i) {
    const float x = Element(p, dtype, i);
    if (std::fabs(x) < largest / 256) SetElement(p, dtype, i, -2 * x);
  }
}

void OneSignFlip(Payload& p, DType dtype, std::mt19937_64& rng) {
  const size_t i = rng() % (Blocks() * BlockSize());
  SetElement(p, dtype, i, -Element(p, dtype, i));
}

void OneHeadScaled(Payload& p, DType dtype, std::mt19937_64& rng) {
  // One head of one block, every value 5 % larger.
  const size_t begin = AnyBlock(rng), head = rng() % kChunk.kv_heads;
  for (uint32_t t = 0; t < kChunk.tokens; ++t)
    for (uint32_t d = 0; d < kChunk.head_dim; ++d) {
      const size_t i = begin + (size_t{t} * kChunk.kv_heads + head) * kChunk.head_dim + d;
      SetElement(p, dtype, i, Element(p, dtype, i) * 1.05f);
    }
}

void OneLayerShifted(Payload& p, DType dtype, std::mt19937_64& rng) {
  // One block, every value moved by 2 % of the block's RMS.
  const size_t begin = AnyBlock(rng), end = begin + BlockSize();
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += std::pow(Element(p, dtype, i), 2);
  const float shift = 0.02f * static_cast<float>(std::sqrt(sum / BlockSize()));
  for (size_t i = begin; i < end; ++i) SetElement(p, dtype, i, Element(p, dtype, i) + shift);
}

struct Row {
  std::string name;
  int64_t stored_at = 0;
  HonestKernel writer = HonestKernel::kFmaInOrder, auditor = HonestKernel::kNoFmaReversed;
  Poison poison;  // none: an honest row
};

}  // namespace
}  // namespace pikv::bench

int main(int argc, char** argv) {
  using namespace pikv;
  using namespace pikv::bench;
  int trials = 40;
  CLI::App app{"audit_catch_bench: the share of honest and poisoned chunks each audit rule flags"};
  app.add_option("--trials", trials, "seeds per cell")->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);

  device::RopeSpec rope;  // Llama-3.1's: head 64 here, theta 500000, llama3 scaling
  rope.head_dim = rope.rotary_dim = kChunk.head_dim;
  rope.theta = 500000;
  rope.scaling = device::RopeScaling::kLlama3;
  rope.factor = 8;
  const std::vector<Row> rows = {
      {"honest, same kernel, at 0", 0, HonestKernel::kFmaInOrder, HonestKernel::kFmaInOrder, {}},
      {"honest, other kernel, at 0",
       0,
       HonestKernel::kFmaInOrder,
       HonestKernel::kNoFmaReversed,
       {}},
      {"honest, double acc, at 0",
       0,
       HonestKernel::kDoubleAccumulate,
       HonestKernel::kFmaInOrder,
       {}},
      {"honest, stored at 1000", 1000, HonestKernel::kFmaInOrder, HonestKernel::kNoFmaReversed, {}},
      {"honest, stored at 32000",
       32000,
       HonestKernel::kNoFmaReversed,
       HonestKernel::kDoubleAccumulate,
       {}},
      {"small values x-2", 0, HonestKernel::kFmaInOrder, HonestKernel::kNoFmaReversed, SmallValues},
      {"one sign flip", 0, HonestKernel::kFmaInOrder, HonestKernel::kNoFmaReversed, OneSignFlip},
      {"one head x1.05", 0, HonestKernel::kFmaInOrder, HonestKernel::kNoFmaReversed, OneHeadScaled},
      {"one layer +2% rms", 0, HonestKernel::kFmaInOrder, HonestKernel::kNoFmaReversed,
       OneLayerShifted},
  };
  const std::vector<DType> dtypes = {DType::kBF16, DType::kF16, DType::kF32};

  std::cout << "audit_catch_bench: " << trials << " seeds per cell; chunk " << kChunk.layers
            << " layers x " << kChunk.tokens << " tokens x " << kChunk.kv_heads << " heads x "
            << kChunk.head_dim << "; share flagged (old rule / new rule"
            << " / new rule with the poisoned object at 1000; honest rows: (the new rule's worst"
            << " score, 1 = its bound))\n\n";
  std::cout << std::left << std::setw(28) << "case";
  for (DType d : dtypes) std::cout << std::setw(26) << DTypeName(d);
  std::cout << "\n";
  std::ostringstream json;
  json << "{\"trials\":" << trials;
  double honest_old = 0, honest_new = 0, honest_score = 0;
  for (const Row& row : rows) {
    std::cout << std::setw(28) << row.name;
    for (DType dtype : dtypes) {
      int old_flags = 0, new_flags = 0, new_far_flags = 0;
      double worst_score = 0;  // honest rows: how near the new rule's bound they come
      for (int seed = 1; seed <= trials; ++seed) {
        HonestChunk chunk = kChunk;
        chunk.seed = static_cast<uint64_t>(seed);
        Payload stored =
            HonestPayload(chunk, rope, dtype, KForm::kRotated, row.stored_at, row.writer);
        const Payload at0 = HonestPayload(chunk, rope, dtype, KForm::kRotated, 0, row.auditor);
        if (row.poison) {
          std::mt19937_64 rng(seed);
          row.poison(stored, dtype, rng);
          Payload far = HonestPayload(chunk, rope, dtype, KForm::kRotated, 1000, row.writer);
          std::mt19937_64 same(seed);
          row.poison(far, dtype, same);
          new_far_flags += NewRuleScore(rope, dtype, 1000, far, at0) > 1;
        }
        old_flags += OldRuleFlags(stored, at0, dtype);
        const double score = NewRuleScore(rope, dtype, row.stored_at, stored, at0);
        new_flags += score > 1;
        worst_score = std::max(worst_score, score);
      }
      const double o = 1.0 * old_flags / trials, n = 1.0 * new_flags / trials;
      std::ostringstream cell;
      cell << Fixed(100 * o, 0) << "% / " << Fixed(100 * n, 0) << "%";
      if (row.poison) cell << " / " << Fixed(100.0 * new_far_flags / trials, 0) << "%";
      if (!row.poison) cell << " (" << Fixed(worst_score, 2) << ")";
      std::cout << std::setw(26) << cell.str();
      if (!row.poison) {
        honest_old = std::max(honest_old, o), honest_new = std::max(honest_new, n);
        honest_score = std::max(honest_score, worst_score);
      }
      std::string key = row.name + " " + std::string(DTypeName(dtype));
      for (char& c : key)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      json << ",\"" << key << "_old\":" << o << ",\"" << key << "_new\":" << n;
      if (row.poison) json << ",\"" << key << "_new_at_1000\":" << 1.0 * new_far_flags / trials;
    }
    std::cout << "\n";
  }
  json << ",\"honest_flagged_old_max\":" << honest_old
       << ",\"honest_flagged_new_max\":" << honest_new
       << ",\"honest_worst_score_new\":" << honest_score << "}";
  std::cout << "\n" << json.str() << "\n";
  return 0;
}
