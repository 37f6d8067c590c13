// ReplayPlan: one delta-pull update (worker/ps/delta_receiver.h) flattened
// into the tables that model/cuda/replay_impl.h replays on a device-resident
// copy of a server's slice. The update's compressed chunks (laid end to end
// over the slice, each already accepted by ParseCompressedChunk) become:
//   - groups tiling the slice: each one-bit group with its two levels and
//     where its bits start in `bits` (the chunks' bit fields, each chunk's
//     from a byte boundary); each top-k chunk one group without bits;
//   - the top-k entries, as slice indices and values.
// Nothing is decoded into float32 and nothing is computed: the bits, levels
// and values are the chunks' own, so a replay from the plan sees exactly the
// values DecodeCompressed gives. Size: the chunks' bit fields (1/8 byte per
// element), 24 bytes per one-bit group and 12 bytes per top-k entry.
//
// Thread-safety: a builder belongs to one thread; a plan is a value.
#ifndef ASGD_STEP_REPLAY_PLAN_H_
#define ASGD_STEP_REPLAY_PLAN_H_

#include <cstdint>
#include <vector>

#include "compression/grad_codec.h"

namespace asgd {

struct ReplayPlan {
  int64_t count = 0;                 // elements of the slice
  std::vector<int64_t> group_start;  // num_groups() + 1; the last is count
  std::vector<float> levels;         // 2 per group; 0 for a top-k group
  std::vector<int64_t> bit_origin;   // per group; -1 for a top-k group
  std::vector<uint8_t> bits;
  std::vector<int64_t> indices;  // top-k entries: strictly increasing
  std::vector<float> values;
  bool all_top_k = true;  // no one-bit chunk (true for an empty plan)

  int64_t num_groups() const {
    return static_cast<int64_t>(group_start.size()) - 1;
  }
  // The bytes a device needs for the plan's tables.
  int64_t bytes() const;
};

class ReplayPlanBuilder {
 public:
  ReplayPlanBuilder();
  // The next chunk of the update, at slice offset plan().count.
  void Add(const CompressedChunk& chunk);
  const ReplayPlan& plan() const { return plan_; }
  // The plan, leaving the builder empty for the next update.
  ReplayPlan Take();

 private:
  ReplayPlan plan_;
};

}  // namespace asgd

#endif  // ASGD_STEP_REPLAY_PLAN_H_
