#include "server/compressed_apply.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace asgd {
namespace {

// ctx with its backup pointer advanced by `offset` elements.
UpdateContext Shifted(const UpdateContext& ctx, int64_t offset) {
  UpdateContext c = ctx;
  if (c.backup != nullptr) c.backup += offset;
  return c;
}

// One-bit, and top-k with optimizer state or weight decay: decode a block into
// L1 scratch, step it.
void ApplyDense(const Optimizer& optimizer, const CompressedChunk& chunk,
                int64_t begin, int64_t end, float* w, float* v,
                const UpdateContext& ctx) {
  alignas(64) float g[kApplyBlock];
  const bool state = optimizer.has_state();
  if (chunk.encoding == GradEncoding::kOneBit) {
    for (int64_t b = begin; b < end; b += kApplyBlock) {
      const int64_t n = std::min(kApplyBlock, end - b);
      DecodeCompressed(chunk, b, b + n, g);
      optimizer.Apply(w + (b - begin), state ? v + (b - begin) : nullptr, g, n,
                      Shifted(ctx, b - begin));
    }
    return;
  }
  // Top-k: the scratch stays 0 except at the entries of the current block,
  // which are put back to 0 after the step.
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
    optimizer.Apply(w + (b - begin), state ? v + (b - begin) : nullptr, g, n,
                    Shifted(ctx, b - begin));
    for (int j = 0; j < num_placed; ++j) g[placed[j]] = 0.0f;
  }
}

// Top-k without state or weight decay: only the selected elements change.
void ApplySparse(const Optimizer& optimizer, const CompressedChunk& chunk,
                 int64_t begin, int64_t end, float* w,
                 const UpdateContext& ctx) {
  const bool dc = ctx.backup != nullptr && optimizer.needs_backup();
  alignas(64) float g[kApplyBlock];
  alignas(64) float wg[kApplyBlock];
  alignas(64) float bg[kApplyBlock];
  int64_t at[kApplyBlock];
  UpdateContext c = ctx;
  c.backup = dc ? bg : nullptr;
  TopKReader reader(chunk);
  int64_t index;
  float value;
  int m = 0;
  auto flush = [&] {
    optimizer.Apply(wg, nullptr, g, m, c);
    for (int j = 0; j < m; ++j) w[at[j]] = wg[j];
    m = 0;
  };
  while (reader.Next(&index, &value) && index < end) {
    if (index < begin) continue;
    const int64_t i = index - begin;
    at[m] = i;
    g[m] = value;
    wg[m] = w[i];
    if (dc) bg[m] = ctx.backup[i];
    if (++m == kApplyBlock) flush();
  }
  if (m > 0) flush();
}

}  // namespace

void ApplyCompressed(const Optimizer& optimizer, const CompressedChunk& chunk,
                     int64_t begin, int64_t end, float* w, float* v,
                     const UpdateContext& ctx) {
  if (begin >= end) return;
  if (chunk.encoding == GradEncoding::kTopK && !optimizer.has_state() &&
      optimizer.options().weight_decay == 0.0f) {
    ApplySparse(optimizer, chunk, begin, end, w, ctx);
  } else {
    ApplyDense(optimizer, chunk, begin, end, w, v, ctx);
  }
}

void ApplyCompressedRange(const Optimizer& optimizer,
                          absl::Span<const CompressedChunk> chunks,
                          int64_t begin, int64_t end, float* w, float* v,
                          const UpdateContext& ctx) {
  int64_t chunk_begin = 0;
  for (const CompressedChunk& chunk : chunks) {
    const int64_t chunk_end = chunk_begin + chunk.count;
    const int64_t from = std::max(begin, chunk_begin);
    const int64_t to = std::min(end, chunk_end);
    if (from < to) {
      const int64_t offset = from - begin;
      ApplyCompressed(optimizer, chunk, from - chunk_begin, to - chunk_begin,
                      w + offset, v != nullptr ? v + offset : nullptr,
                      Shifted(ctx, offset));
    }
    if (chunk_end >= end) break;
    chunk_begin = chunk_end;
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
