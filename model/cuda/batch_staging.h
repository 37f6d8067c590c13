// BatchStaging: the bookkeeping of a backend's two input slots, so that the
// minibatch announced by ModelBackend::StageNext (model/backend.h) is copied
// and uploaded while the one before it computes. Device-independent (no CUDA
// here): the CUDA backend's stager (cuda_batch_stager.h) owns the slots'
// memory and asks this class which slot a call reads and which one to fill;
// batch_staging_test checks every decision on the CPU.
//
// A gradient call, in order:
//   1. Begin(batch): the slot the call reads, and whether the batch must be
//      uploaded into it now (it was not staged). A staged batch is the one
//      announced with the same spans; its slot is then used, not refilled.
//   2. (the call enqueues its computation on that slot)
//   3. TakeAnnounced(&slot): the batch announced since, if any and if it is
//      not the one this call computes: the caller copies it into `slot` (the
//      slot this call does not read) and starts its upload.
// Forward-only calls (Predict, LogPosteriors) do 1 only, so an announcement
// waits for the next gradient call and a staged batch stays staged unless the
// forward call is given exactly it. Reset() forgets everything (after an
// error, when what was in flight is unknown).
//
// The slot a call reads is never the one a staged batch waits in unless the
// call reads that batch, and TakeAnnounced never names the slot the current
// call reads: an upload into one slot never races the computation on the
// other. The caller must make sure the previous upload into a slot has
// finished before copying into it again (the CUDA stager waits for its copy
// stream at the end of every call).
//
// Thread-safety: none; the backend's (one thread at a time).
#ifndef ASGD_MODEL_CUDA_BATCH_STAGING_H_
#define ASGD_MODEL_CUDA_BATCH_STAGING_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "model/backend.h"

namespace asgd {
namespace cuda {

class BatchStaging {
 public:
  // Which slot a call reads; `upload`: the batch is not there yet.
  struct Use {
    int slot = 0;
    bool upload = true;
  };

  // StageNext: remembers `next` (its spans, not its values); a later
  // announcement replaces an earlier one that was not taken yet.
  void Announce(const Batch& next) { announced_ = next; }

  // The start of a call that computes `batch`.
  Use Begin(const Batch& batch) {
    const Spans spans = SpansOf(batch);
    if (staged_slot_ >= 0 && spans == staged_) {
      current_ = staged_slot_;
      staged_slot_ = -1;
      return {current_, false};
    }
    // Announced but not copied yet: this call is the one it announced.
    if (announced_.has_value() && SpansOf(*announced_) == spans) {
      announced_.reset();
    }
    current_ = staged_slot_ >= 0 ? 1 - staged_slot_ : 0;
    return {current_, true};
  }

  // After a gradient call's work is enqueued: the announced batch to copy
  // into *slot now, or nothing. From then on that batch counts as staged.
  std::optional<Batch> TakeAnnounced(int* slot) {
    if (!announced_.has_value()) return std::nullopt;
    std::optional<Batch> next = std::move(announced_);
    announced_.reset();
    *slot = 1 - current_;
    staged_slot_ = *slot;
    staged_ = SpansOf(*next);
    return next;
  }

  // Nothing announced, nothing staged.
  void Reset() {
    announced_.reset();
    staged_slot_ = -1;
  }

  // The slot holding a staged batch, or -1.
  int staged_slot() const { return staged_slot_; }

 private:
  // A batch's identity: where its rows and labels are, and their shape.
  struct Spans {
    const float* inputs = nullptr;
    size_t input_count = 0;
    const int32_t* labels = nullptr;
    size_t label_count = 0;
    int sequences = 0;
    int steps = 0;
    bool operator==(const Spans& o) const {
      return inputs == o.inputs && input_count == o.input_count &&
             labels == o.labels && label_count == o.label_count &&
             sequences == o.sequences && steps == o.steps;
    }
  };
  static Spans SpansOf(const Batch& b) {
    return {b.inputs.data(), b.inputs.size(), b.labels.data(),
            b.labels.size(), b.sequences,     b.steps};
  }

  std::optional<Batch> announced_;
  int staged_slot_ = -1;  // -1: nothing staged
  Spans staged_;
  int current_ = 0;  // the slot the current (or last) call reads
};

}  // namespace cuda
}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_BATCH_STAGING_H_
