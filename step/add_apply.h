// The consensus add: a server's step for an ADD push (consensus training,
// EASGD's elastic step and ADMM's average, proto PushHeader.Kind ADD):
//   w[i] += scale * e[i]   where keep[i] != 0 (or everywhere, keep null)
// with no optimizer and no learning rate; the optimizer state is not
// touched. `scale` is 1 unless the store lowered it to respect max_change.
// Each element is one float32 product and one float32 sum, each rounded on
// its own (STEP_COPTS: no fused multiply-add), so a worker that knows e and
// scale can compute the same bits.
//
// AddStaysBounded runs the same arithmetic read-only and says whether every
// result stays finite and within kMaxMagnitude (step/optimizer.h), for the
// all-or-none check of an update whose admission bound failed.
//
// Thread-safety: pure functions over caller-owned buffers; concurrent calls
// on disjoint ranges are fine.
#ifndef ASGD_STEP_ADD_APPLY_H_
#define ASGD_STEP_ADD_APPLY_H_

#include <cstdint>

#include "step/optimizer.h"

namespace asgd {

// Adds scale * e to the n weights w (pruned weights, keep[i] == 0, stay as
// they are: 0). Returns the largest |w| left (max_abs_v stays 0).
ApplyStats ApplyAdd(float* w, const float* e, int64_t n, float scale,
                    const uint8_t* keep);

// True when ApplyAdd would leave every weight finite and within
// kMaxMagnitude. Reads only.
bool AddStaysBounded(const float* w, const float* e, int64_t n, float scale,
                     const uint8_t* keep);

}  // namespace asgd

#endif  // ASGD_STEP_ADD_APPLY_H_
