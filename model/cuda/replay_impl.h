// The replay of one delta-pull update (worker/ps/delta_receiver.h) as
// element-wise passes over an Exec (layer_math.h): compiled by nvcc into the
// CUDA plugin (cuda_replay.cu), where it replays on a device-resident copy of
// a server's slice, and by the host compiler for replay_impl_test, which runs
// it on the CPU (HostExec) against step/compressed_apply.h's
// ApplyCompressedRange, bit for bit.
//
// What an update is on the device: the host parses and checks its
// compressed chunks (compression/grad_codec.h) as today, then flattens them
// into ReplayPlan's tables (replay_plan.h), a few bytes per one-bit group or
// top-k entry, which are uploaded with the chunks' bit fields; the float32
// gradient is never materialised. Per element e of the slice:
//
//   g = the decoded value: a one-bit group's level (negative or
//       non-negative, by e's bit), a top-k entry's value, or +0 for an
//       element of a top-k chunk that is not among its entries;
//       +0 for a pruned element of a pruned model (UpdateContext::keep);
//   if wd != 0:  g = g + wd * w[e]
//   w[e] = w[e] - lr * g
//
// which is Optimizer::Apply (step/optimizer.h) for plain SGD with weight
// decay, the server's step for a delta pull's update, in its order. Decoding
// does no arithmetic. Exactness needs each product and sum rounded on its
// own: on the device MulRn / AddRn / SubRn below are __fmul_rn, __fadd_rn and
// __fsub_rn, which nvcc never contracts into a fused multiply-add; on the
// host they are plain float operations, so a host build must not contract
// either (-ffp-contract=off, as step/BUILD's libraries; replay_impl_test is
// built so).
//
// Two passes:
//   ReplayDense   every element, as above;
//   ReplaySparse  only the top-k entries of kept elements, when every chunk
//                 is top-k and wd == 0: every other element has g = +0, and
//                 w - lr * (+0) is w itself (also for w = -0), so the two
//                 passes leave the same bits (as ApplyCompressedRange's
//                 sparse path, which also skips pruned elements).
// Both raise *bad (set to 1, never cleared here) when an element they wrote
// is NaN or larger than kMaxMagnitude in magnitude: the caller refuses the
// update, as DeltaReceiver does on the host (the copy is then lost).
//
// Thread-safety: pure functions over Exec memory; an Exec's rules apply.
#ifndef ASGD_MODEL_CUDA_REPLAY_IMPL_H_
#define ASGD_MODEL_CUDA_REPLAY_IMPL_H_

#include <math.h>

#include <cstdint>

#include "absl/status/status.h"
#include "model/cuda/layer_math.h"
#include "step/replay_plan.h"

namespace asgd {
namespace cuda_ops {

// step/optimizer.h's kMaxMagnitude, as a float (1e37 is below FLT_MAX).
inline constexpr float kReplayMaxMagnitude = 1e37f;

// One update of a slice of `count` elements, pointers in the Exec's memory.
// The slice is tiled by groups: group j covers [group_start[j],
// group_start[j + 1]); group_start has num_groups + 1 entries, the first 0,
// the last count, strictly increasing. A one-bit group has its
// (negative, non-negative) levels at levels[2j], levels[2j + 1] and the bit
// of its element e at bit index bit_origin[j] + (e - group_start[j]) of
// `bits` (bit i of bits[i / 8] is (bits[i / 8] >> (i % 8)) & 1, as the
// one-bit chunk format). A group of a top-k chunk has bit_origin -1: its
// elements decode to +0 unless they are among the top-k entries, whose slice
// indices (strictly increasing, < count) and values are
// indices[0, k), values[0, k). A pruned model's mask: bit e of `keep_bits`
// (numbered as `bits`; common/wire_codec.h's PackPruneMask) is 0 where
// element e is pruned; null for a dense model.
struct ReplayTables {
  int64_t count = 0;
  int64_t num_groups = 0;
  const int64_t* group_start = nullptr;
  const float* levels = nullptr;
  const int64_t* bit_origin = nullptr;
  const uint8_t* bits = nullptr;
  int64_t k = 0;
  const int64_t* indices = nullptr;
  const float* values = nullptr;
  const uint8_t* keep_bits = nullptr;
};

// The tables of `plan` where it is (host memory), under `keep_bits` (null:
// dense): a replay on the host (host_replay_copy.h, replay_impl_test); a
// device replay uploads them.
inline ReplayTables TablesOf(const ReplayPlan& plan,
                             const uint8_t* keep_bits = nullptr) {
  ReplayTables t;
  t.count = plan.count;
  t.num_groups = plan.num_groups();
  t.group_start = plan.group_start.data();
  t.levels = plan.levels.data();
  t.bit_origin = plan.bit_origin.data();
  t.bits = plan.bits.data();
  t.k = static_cast<int64_t>(plan.indices.size());
  t.indices = plan.indices.data();
  t.values = plan.values.data();
  t.keep_bits = keep_bits;
  return t;
}

// The first index j of sorted[0, n) with sorted[j] > x (n when none).
ASGD_HD inline int64_t UpperBound(const int64_t* sorted, int64_t n, int64_t x) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] <= x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Whether element e takes its gradient (false: pruned).
ASGD_HD inline bool ReplayKept(const uint8_t* keep_bits, int64_t e) {
  return keep_bits == nullptr || ((keep_bits[e >> 3] >> (e & 7)) & 1) != 0;
}

// The decoded gradient of element e.
ASGD_HD inline float ReplayGradient(const ReplayTables& t, int64_t e) {
  if (!ReplayKept(t.keep_bits, e)) return 0.0f;
  if (t.k > 0) {
    const int64_t j = UpperBound(t.indices, t.k, e) - 1;
    if (j >= 0 && t.indices[j] == e) return t.values[j];
  }
  const int64_t group = UpperBound(t.group_start, t.num_groups + 1, e) - 1;
  const int64_t origin = t.bit_origin[group];
  if (origin < 0) return 0.0f;
  const int64_t bit = origin + (e - t.group_start[group]);
  const bool set = (t.bits[bit >> 3] >> (bit & 7)) & 1;
  return t.levels[2 * group + (set ? 1 : 0)];
}

// Optimizer::Apply's plain-SGD step of one element; raises *bad when the
// result is NaN or out of bounds.
ASGD_HD inline void ReplayStep(float* w, float g, float lr, float wd,
                               int* bad) {
  const float wi = *w;
  if (wd != 0.0f) g = AddRn(g, MulRn(wd, wi));
  const float out = SubRn(wi, MulRn(lr, g));
  *w = out;
  if (!(fabsf(out) <= kReplayMaxMagnitude)) *bad = 1;
}

// Element e of the slice: w[e] is the only element it writes.
struct ReplayDenseOp {
  ReplayTables t;
  float* w;
  float lr, wd;
  int* bad;
  ASGD_HD void operator()(int64_t e) const {
    ReplayStep(w + e, ReplayGradient(t, e), lr, wd, bad);
  }
};

// Top-k entry j: writes w[indices[j]] (the indices are distinct) unless
// that element is pruned.
struct ReplaySparseOp {
  const int64_t* indices;
  const float* values;
  const uint8_t* keep_bits;
  float* w;
  float lr;
  int* bad;
  ASGD_HD void operator()(int64_t j) const {
    if (!ReplayKept(keep_bits, indices[j])) return;
    ReplayStep(w + indices[j], values[j], lr, 0.0f, bad);
  }
};

template <class Exec>
absl::Status ReplayDense(Exec& x, const ReplayTables& t, float* w, float lr,
                         float wd, int* bad) {
  return x.ForEach(t.count, ReplayDenseOp{t, w, lr, wd, bad});
}

template <class Exec>
absl::Status ReplaySparse(Exec& x, const ReplayTables& t, float* w, float lr,
                          int* bad) {
  return x.ForEach(
      t.k, ReplaySparseOp{t.indices, t.values, t.keep_bits, w, lr, bad});
}

}  // namespace cuda_ops
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_REPLAY_IMPL_H_
