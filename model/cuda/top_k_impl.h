// The top-k encoding of a whole TopKPlan (compression/top_k_plan.h) with
// error feedback, as steps that one GPU thread (or one host loop iteration)
// runs: compiled by nvcc into the CUDA plugin (cuda_top_k.cu launches
// them, the resident model's TakeTopK), and by the host compiler for
// top_k_impl_test, which runs every step on the CPU and checks the entries
// and the residual against EncodeTopKPlan, bit for bit.
//
// The reference selects, per chunk, the k largest |a| (a = sum * scale +
// residual), ties to the lower index. Magnitudes of finite floats order as
// their bit patterns without the sign (the key), so the k-th largest key T
// is found by a radix select over the key's 31 bits in three rounds
// (11, 11 and 9 bits): a histogram of the candidates' next bits, then a
// walk down from the top bin to the one that holds the k-th key. Entries
// are then every key > T and the first `equal_left` keys == T, in index
// order: each chunk is cut into tiles; a count per tile, a running sum over
// the chunk's tiles (where each tile's entries go and how many keys == T
// come before it), then each tile writes its entries in order.
//
// Steps, for every chunk c (blocks of the element steps may run in any
// order; each step after the previous one has finished):
//   1. TopKAverage per element, then TopKBin(round 0) into the histogram;
//   2. TopKSelect(round 0) once per chunk;
//   3. for rounds 1, 2: TopKBin per element (-1: not a candidate), then
//      TopKSelect;
//   4. TopKTileCount per tile; TopKTileOffsets once per chunk;
//   5. TopKTileEmit per tile: the entries (chunk-relative indices and
//      values) at the chunk's entry_begin, and the residual.
// `bad` collects kTopKNonFinite (some a is NaN or Inf: step 5 must then
// write nothing) and kTopKInconsistent (a histogram or count that cannot
// be, which a correct run never raises).
//
// Arithmetic: a = AddRn(MulRn(sum, scale), residual), as the reference's
// two roundings; keys, counts and the emitted values are exact.
//
// Thread-safety: pure functions over caller memory.
#ifndef ASGD_MODEL_CUDA_TOP_K_IMPL_H_
#define ASGD_MODEL_CUDA_TOP_K_IMPL_H_

#include <cstdint>
#include <cstring>

#include "model/cuda/layer_math.h"

namespace asgd {
namespace cuda_ops {

inline constexpr int kTopKRounds = 3;
inline constexpr int kTopKMaxBins = 2048;
inline constexpr int kTopKNonFinite = 1;
inline constexpr int kTopKInconsistent = 2;

// A chunk of the plan: its elements [flat_begin, flat_begin + count), k of
// them sent, its entries at [entry_begin, entry_begin + k) of the output.
struct TopKChunkJob {
  int64_t flat_begin;
  int64_t count;
  int64_t k;
  int64_t entry_begin;
};

// What the select rounds found for a chunk.
struct TopKChunkState {
  int64_t need;        // keys still to take at the current prefix
  uint32_t prefix;     // the high bits of T found so far
  uint32_t threshold;  // T (after the last round)
  int64_t equal_left;  // keys == T to take (after the last round)
};

ASGD_HD inline int TopKRoundShift(int round) {
  return round == 0 ? 20 : round == 1 ? 9 : 0;
}
ASGD_HD inline int TopKRoundBits(int round) { return round == 2 ? 9 : 11; }

ASGD_HD inline uint32_t TopKKeyOf(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v) & 0x7fffffffu;
#else
  uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  return u & 0x7fffffffu;
#endif
}

// Step 1 for flat element e: a[e] = sum[e] * scale + residual[e]; returns
// its key; raises kTopKNonFinite for a NaN or Inf (*bad |= ...: the caller's
// atomic or plain or).
ASGD_HD inline uint32_t TopKAverage(const float* sum, float scale,
                                    const float* residual, int64_t e, float* a,
                                    int* bad_bits) {
  const float v = AddRn(MulRn(sum[e], scale), residual[e]);
  a[e] = v;
  const uint32_t key = TopKKeyOf(v);
  if (key >= 0x7f800000u) *bad_bits |= kTopKNonFinite;
  return key;
}

// The histogram bin of `key` in `round` (0 .. 2^TopKRoundBits - 1), or -1
// when its higher bits are not the prefix the earlier rounds chose.
ASGD_HD inline int TopKBin(uint32_t key, int round, uint32_t prefix) {
  if (round > 0 && (key >> TopKRoundShift(round - 1)) != prefix) return -1;
  return static_cast<int>((key >> TopKRoundShift(round)) &
                          ((1u << TopKRoundBits(round)) - 1));
}

// Step 2/3 once per chunk, after its round-`round` histogram `hist`
// (2^TopKRoundBits(round) bins) is complete.
ASGD_HD inline void TopKSelect(const uint32_t* hist, int round, int64_t k,
                               TopKChunkState* s, int* bad_bits) {
  if (round == 0) {
    s->need = k;
    s->prefix = 0;
    s->threshold = 0x7fffffffu;  // k == 0: no key is above it
    s->equal_left = 0;
  }
  if (k == 0) return;
  int64_t above = 0;
  int bin = (1 << TopKRoundBits(round)) - 1;
  while (bin >= 0 && above + hist[bin] < s->need) above += hist[bin--];
  if (bin < 0) {
    *bad_bits |= kTopKInconsistent;
    return;
  }
  s->need -= above;
  s->prefix = (s->prefix << TopKRoundBits(round)) | static_cast<uint32_t>(bin);
  if (round == kTopKRounds - 1) {
    s->threshold = s->prefix;
    s->equal_left = s->need;
  }
}

// The elements [begin, end) of chunk c's tile `tile` (chunk-relative).
ASGD_HD inline bool TopKTileRange(const TopKChunkJob& c, int64_t tile,
                                  int64_t tile_size, int64_t* begin,
                                  int64_t* end) {
  *begin = tile * tile_size;
  *end = *begin + tile_size < c.count ? *begin + tile_size : c.count;
  return *begin < *end;
}

// Step 4a per tile: its keys > T and == T.
ASGD_HD inline void TopKTileCount(const float* a, const TopKChunkJob& c,
                                  const TopKChunkState& s, int64_t tile,
                                  int64_t tile_size, int64_t* greater,
                                  int64_t* equal) {
  int64_t begin, end, gt = 0, eq = 0;
  if (TopKTileRange(c, tile, tile_size, &begin, &end)) {
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t key = TopKKeyOf(a[c.flat_begin + i]);
      gt += key > s.threshold;
      eq += key == s.threshold;
    }
  }
  *greater = gt;
  *equal = eq;
}

// Step 4b once per chunk over its `num_tiles` tiles: turns each tile's
// (greater, equal) into (where its first entry goes in the output, the
// keys == T before it in the chunk).
ASGD_HD inline void TopKTileOffsets(const TopKChunkJob& c,
                                    const TopKChunkState& s, int64_t num_tiles,
                                    int64_t* greater_to_offset,
                                    int64_t* equal_to_before, int* bad_bits) {
  int64_t entries = 0, equal_before = 0;
  for (int64_t t = 0; t < num_tiles; ++t) {
    const int64_t gt = greater_to_offset[t], eq = equal_to_before[t];
    int64_t eq_taken = s.equal_left - equal_before;
    eq_taken = eq_taken < 0 ? 0 : eq_taken > eq ? eq : eq_taken;
    greater_to_offset[t] = c.entry_begin + entries;
    equal_to_before[t] = equal_before;
    entries += gt + eq_taken;
    equal_before += eq;
  }
  if (entries != c.k) *bad_bits |= kTopKInconsistent;
}

// Step 5 per tile: its entries at `offset` (indices chunk-relative) and
// residual = 0 for them, a for the rest.
ASGD_HD inline void TopKTileEmit(const float* a, const TopKChunkJob& c,
                                 const TopKChunkState& s, int64_t tile,
                                 int64_t tile_size, int64_t offset,
                                 int64_t equal_before, float* residual,
                                 uint32_t* indices, float* values) {
  int64_t begin, end;
  if (!TopKTileRange(c, tile, tile_size, &begin, &end)) return;
  for (int64_t i = begin; i < end; ++i) {
    const float v = a[c.flat_begin + i];
    const uint32_t key = TopKKeyOf(v);
    bool take = key > s.threshold;
    if (key == s.threshold) take = equal_before++ < s.equal_left;
    if (take) {
      indices[offset] = static_cast<uint32_t>(i);
      values[offset] = v;
      ++offset;
      residual[c.flat_begin + i] = 0.0f;
    } else {
      residual[c.flat_begin + i] = v;
    }
  }
}

}  // namespace cuda_ops
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_TOP_K_IMPL_H_
