// The consensus average of ADMM: a server's step for an ADMM push (proto
// PushHeader.Kind ADMM). The server keeps, besides the consensus z (its
// weights), each worker slot's last point u_k = x_k + lam_k / rho (the slot
// buffers of ParamStore, one per slot, N of them); z is their average. A
// push of a new point u for slot k replaces u_k in that average:
//   d[i]    = u[i] - s[i]                  (s: slot k's buffer)
//   w[i]   += (scale * d[i]) / N
//   s[i]    = u[i]                         (scale 1)
//   s[i]   += scale * d[i]                 (scale < 1)
// where keep[i] != 0 (or everywhere, keep null): a pruned weight and its
// slot values stay as they are. `scale` is 1 unless the step is lowered to
// max_change (AdmmScale). Each operation is one float32 operation rounded
// on its own (STEP_COPTS: no fused multiply-add), in the order written.
// With scale 1 the slot becomes u exactly; z stays the slots' average up to
// the rounding of these sums.
//
// ScanAdmm runs the same arithmetic read-only over one shard's part: the
// largest |d| (for max_change, over every shard's part together) and
// whether every result stays finite and within kMaxMagnitude
// (step/optimizer.h), for the all-or-none check every ADMM update takes.
// With a smaller scale each result lies between the value it had and the
// scale-1 result, so the check at scale 1 covers it.
//
// Thread-safety: pure functions over caller-owned buffers; concurrent calls
// on disjoint ranges are fine.
#ifndef ASGD_STEP_ADMM_APPLY_H_
#define ASGD_STEP_ADMM_APPLY_H_

#include <cstdint>

#include "step/optimizer.h"

namespace asgd {

struct AdmmScan {
  bool bounded = true;   // every result finite and within kMaxMagnitude
  double max_delta = 0;  // largest |u - s| over the kept elements
};

AdmmScan ScanAdmm(const float* w, const float* u, const float* s, int64_t n,
                  int slots, const uint8_t* keep);

// The step's scale for an update whose largest |u - s| over the whole
// server is `max_delta`: 1, or (rounded down) the factor that moves no
// weight by more than max_change (max_delta / slots * scale <=
// max_change). max_change <= 0: no bound.
float AdmmScale(double max_delta, int slots, double max_change);

// Applies the step (above) to the n weights w and slot values s. Returns
// the largest |w| left (max_abs_v 0).
ApplyStats ApplyAdmm(float* w, const float* u, float* s, int64_t n, int slots,
                     float scale, const uint8_t* keep);

}  // namespace asgd

#endif  // ASGD_STEP_ADMM_APPLY_H_
