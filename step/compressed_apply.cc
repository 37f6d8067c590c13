#include "step/compressed_apply.h"

// The exact-replay invariant (step/optimizer.h): the step's float arithmetic
// must not be compiled with fast-math.
#if defined(__FAST_MATH__)
#error "-ffast-math breaks exact replay (see step/optimizer.h)"
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace asgd {
namespace {

// ctx with its backup pointer advanced by `offset` elements.
UpdateContext Shifted(const UpdateContext& ctx, int64_t offset) {
  UpdateContext c = ctx;
  if (c.backup != nullptr) c.backup += offset;
  if (c.keep != nullptr) c.keep += offset;
  return c;
}

void Raise(ApplyStats* to, const ApplyStats& from) {
  to->max_abs_w = std::max(to->max_abs_w, from.max_abs_w);
  to->max_abs_v = std::max(to->max_abs_v, from.max_abs_v);
}

// Calls block(g, offset, n) for consecutive blocks of at most kApplyBlock
// elements covering [begin, end) of `chunk`, with g the decoded gradient of
// elements [begin + offset, begin + offset + n). Top-k fills a zeroed scratch
// only at its entries and clears them again after each block.
template <typename Block>
void ForEachDecodedBlock(const CompressedChunk& chunk, int64_t begin,
                         int64_t end, Block block) {
  alignas(64) float g[kApplyBlock];
  if (chunk.encoding == GradEncoding::kOneBit) {
    for (int64_t b = begin; b < end; b += kApplyBlock) {
      const int64_t n = std::min(kApplyBlock, end - b);
      DecodeCompressed(chunk, b, b + n, g);
      if (!block(g, b - begin, n)) return;
    }
    return;
  }
  std::fill_n(g, kApplyBlock, 0.0f);
  int32_t placed[kApplyBlock];
  TopKReader reader(chunk);
  int64_t index = -1;
  float value = 0.0f;
  bool have = reader.Next(&index, &value);
  while (have && index < begin) have = reader.Next(&index, &value);
  for (int64_t b = begin; b < end; b += kApplyBlock) {
    const int64_t n = std::min(kApplyBlock, end - b);
    int num_placed = 0;
    while (have && index < b + n) {
      const int32_t at = static_cast<int32_t>(index - b);
      g[at] = value;
      placed[num_placed++] = at;
      have = reader.Next(&index, &value);
    }
    const bool more = block(g, b - begin, n);
    for (int j = 0; j < num_placed; ++j) g[placed[j]] = 0.0f;
    if (!more) return;
  }
}

// Calls part(chunk, from, to, offset) for the part [from, to) of each chunk
// that falls into [begin, end) of the chunks laid end to end; offset is where
// that part starts relative to begin.
template <typename Part>
void ForEachPart(absl::Span<const CompressedChunk> chunks, int64_t begin,
                 int64_t end, Part part) {
  int64_t chunk_begin = 0;
  for (const CompressedChunk& chunk : chunks) {
    const int64_t chunk_end = chunk_begin + chunk.count;
    const int64_t from = std::max(begin, chunk_begin);
    const int64_t to = std::min(end, chunk_end);
    if (from < to &&
        !part(chunk, from - chunk_begin, to - chunk_begin, from - begin)) {
      return;
    }
    if (chunk_end >= end) break;
    chunk_begin = chunk_end;
  }
}

// One-bit, and top-k with optimizer state or weight decay: decode a block into
// L1 scratch, step it.
ApplyStats ApplyDense(const Optimizer& optimizer, const CompressedChunk& chunk,
                      int64_t begin, int64_t end, float* w, float* v,
                      const UpdateContext& ctx) {
  const bool state = optimizer.has_state();
  ApplyStats stats;
  ForEachDecodedBlock(chunk, begin, end,
                      [&](const float* g, int64_t offset, int64_t n) {
                        Raise(&stats, optimizer.Apply(
                                          w + offset,
                                          state ? v + offset : nullptr, g, n,
                                          Shifted(ctx, offset)));
                        return true;
                      });
  return stats;
}

// Top-k without state or weight decay: only the selected elements change.
ApplyStats ApplySparse(const Optimizer& optimizer,
                       const CompressedChunk& chunk, int64_t begin,
                       int64_t end, float* w, const UpdateContext& ctx) {
  const bool dc = ctx.backup != nullptr && optimizer.needs_backup();
  alignas(64) float g[kApplyBlock];
  alignas(64) float wg[kApplyBlock];
  alignas(64) float bg[kApplyBlock];
  int64_t at[kApplyBlock];
  UpdateContext c = ctx;
  c.backup = dc ? bg : nullptr;
  c.keep = nullptr;  // a pruned element is skipped below: its gradient is 0
  TopKReader reader(chunk);
  int64_t index;
  float value;
  int m = 0;
  ApplyStats stats;
  auto flush = [&] {
    Raise(&stats, optimizer.Apply(wg, nullptr, g, m, c));
    for (int j = 0; j < m; ++j) w[at[j]] = wg[j];
    m = 0;
  };
  while (reader.Next(&index, &value) && index < end) {
    if (index < begin) continue;
    const int64_t i = index - begin;
    if (ctx.keep != nullptr && ctx.keep[i] == 0) continue;
    at[m] = i;
    g[m] = value;
    wg[m] = w[i];
    if (dc) bg[m] = ctx.backup[i];
    if (++m == kApplyBlock) flush();
  }
  if (m > 0) flush();
  return stats;
}

}  // namespace

int64_t CompressedGradient::size() const {
  int64_t n = 0;
  for (const CompressedChunk& c : chunks) n += c.count;
  return n;
}

float CompressedMaxAbs(const CompressedChunk& chunk) {
  float max_abs = 0.0f;
  const char* values =
      chunk.encoding == GradEncoding::kOneBit ? chunk.levels : chunk.values;
  const int64_t n =
      chunk.encoding == GradEncoding::kOneBit ? 2 * chunk.num_groups : chunk.k;
  for (int64_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, values + 4 * i, sizeof(x));
    max_abs = std::max(max_abs, std::fabs(x));
  }
  return max_abs;
}

bool AppliesSparsely(const Optimizer& optimizer, GradEncoding encoding) {
  return encoding == GradEncoding::kTopK && !optimizer.has_state() &&
         optimizer.options().weight_decay == 0.0f;
}

ApplyStats ApplyCompressed(const Optimizer& optimizer,
                           const CompressedChunk& chunk, int64_t begin,
                           int64_t end, float* w, float* v,
                           const UpdateContext& ctx) {
  if (begin >= end) return {};
  if (AppliesSparsely(optimizer, chunk.encoding)) {
    return ApplySparse(optimizer, chunk, begin, end, w, ctx);
  }
  return ApplyDense(optimizer, chunk, begin, end, w, v, ctx);
}

ApplyStats ApplyCompressedRange(const Optimizer& optimizer,
                                absl::Span<const CompressedChunk> chunks,
                                int64_t begin, int64_t end, float* w, float* v,
                                const UpdateContext& ctx) {
  ApplyStats stats;
  ForEachPart(chunks, begin, end,
              [&](const CompressedChunk& chunk, int64_t from, int64_t to,
                  int64_t offset) {
                Raise(&stats, ApplyCompressed(
                                  optimizer, chunk, from, to, w + offset,
                                  v != nullptr ? v + offset : nullptr,
                                  Shifted(ctx, offset)));
                return true;
              });
  return stats;
}

bool CompressedStaysBounded(const Optimizer& optimizer,
                            absl::Span<const CompressedChunk> chunks,
                            int64_t begin, int64_t end, const float* w,
                            const float* v, const UpdateContext& ctx) {
  const bool state = optimizer.has_state();
  bool ok = true;
  ForEachPart(chunks, begin, end,
              [&](const CompressedChunk& chunk, int64_t from, int64_t to,
                  int64_t offset) {
                ForEachDecodedBlock(
                    chunk, from, to,
                    [&](const float* g, int64_t block_offset, int64_t n) {
                      const int64_t at = offset + block_offset;
                      ok = optimizer.StaysBounded(
                          w + at, state ? v + at : nullptr, g, n,
                          Shifted(ctx, at));
                      return ok;
                    });
                return ok;
              });
  return ok;
}

void DecodeCompressedRange(absl::Span<const CompressedChunk> chunks,
                           float* out) {
  for (const CompressedChunk& chunk : chunks) {
    DecodeCompressed(chunk, 0, chunk.count, out);
    out += chunk.count;
  }
}

absl::Status ApplyCompressedBytes(const Optimizer& optimizer,
                                  absl::string_view data,
                                  const CodecLimits& limits, float* w, float* v,
                                  int64_t n, const UpdateContext& ctx) {
  absl::StatusOr<CompressedChunk> chunk = ParseCompressedChunk(data, limits);
  if (!chunk.ok()) return chunk.status();
  if (chunk->count != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compressed chunk: ", chunk->count, " elements, expected ", n));
  }
  ApplyCompressed(optimizer, *chunk, 0, n, w, v, ctx);
  return absl::OkStatus();
}

}  // namespace asgd
