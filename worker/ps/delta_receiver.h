// DeltaReceiver: applies the reply to a delta pull (proto PullRequest.delta,
// messages with PullChunk.exact) to the worker's copy of one server's slice.
//
// The reply is either updates only, replayed on the copy the worker holds at
// the version its request named, or float32 weights taken at one version b
// followed by the updates b+1 .. v. Each update is a DeltaUpdate header and
// its compressed chunks (1-bit or top-k), laid end to end over the slice; it
// is replayed with the server's own arithmetic (Optimizer::Apply on the
// decoded chunk, step/compressed_apply.h), so the copy ends bit for bit
// equal to the server's weights at v. Every field is checked: versions must
// follow one another and end at the reply's version, chunks must tile the
// slice, parse (grad_codec.h) within the server's chunk limit, and leave the
// copy finite and within kMaxMagnitude (step/optimizer.h); the learning
// rate and decay must be finite and in range.
//
// On any error the copy is partly updated: the caller must treat it as lost
// (pull weights again).
//
// On a copy kept where the model lives (an ExactCopy, model/exact_copy.h:
// the device's memory), weights are assembled in the host buffer `copy` and
// uploaded once complete; each update's chunks are checked as they arrive
// and kept, and the complete update goes to the copy as a ReplayPlan
// (step/replay_plan.h), replayed there with the same arithmetic: the copy
// ends bit for bit the same. `copy` then holds the last weights received
// (not the updates): the caller downloads the copy at the end.
//
// A pruned model (proto PullRequest.replays_mask): the exact weights come
// with the mask, each weight chunk followed by a PRUNE_MASK chunk of the
// same tensor and offset (every chunk or none; a pruned weight must be 0).
// The mask goes to `keep` and stays there with the copy (with `device`, it
// is uploaded with the weights, ExactCopy::Upload, and `keep` emptied);
// updates are then replayed under it as the server applied them (a pruned
// element takes gradient 0: UpdateContext::keep). A receiver without `keep`
// refuses mask chunks, and weights without them leave `keep` empty (a dense
// model).
//
// With a PartRunner of more than one part (host copies), an update's chunks are
// checked as they arrive and kept (their encoded bytes: at most the slice's
// compressed size), and the whole update is replayed once its last chunk
// arrived, the slice split into the runner's parts, each replayed by one
// thread. Every element goes through the same Optimizer::Apply as without the
// runner (the step is elementwise), so the copy ends bit for bit the same; only
// where the replay runs changes. An update that would leave the copy non-finite
// is refused after its replay, as without the runner.
//
// Thread-safety: one thread at a time (the runner's helpers work only inside
// a call).
#ifndef ASGD_WORKER_PS_DELTA_RECEIVER_H_
#define ASGD_WORKER_PS_DELTA_RECEIVER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "common/tensor_messages.h"
#include "compression/grad_codec.h"
#include "model/exact_copy.h"
#include "step/optimizer.h"
#include "worker/ps/part_runner.h"

namespace asgd {

class DeltaReceiver {
 public:
  // `copy` holds range.size() floats: the copy, or with `device` the host
  // buffer weights are assembled in. `held` is the version the copy holds
  // exactly, if any. `max_chunk_elements` bounds the weight chunks,
  // `max_compressed_elements` the compressed ones. `runner` (may be null:
  // each chunk is replayed on arrival by the calling thread; unused with
  // `device`) and `device` (null: the copy is `copy`; else of range.size()
  // floats) must outlive the receiver. `keep` (null: mask chunks are
  // refused): the copy's mask, empty for a dense model or range.size()
  // flags, replaced by the next exact weights (with `device`: where the
  // mask is assembled, emptied once uploaded); it must outlive the receiver.
  DeltaReceiver(const ModelLayout* layout, FlatRange range,
                int64_t max_chunk_elements, int64_t max_compressed_elements,
                float* copy, std::optional<uint64_t> held,
                PartRunner* runner = nullptr, ExactCopy* device = nullptr,
                std::vector<uint8_t>* keep = nullptr);

  // One message of the reply (not the end-of-pull message): a weight chunk,
  // an update's header or one of its chunks. DataLoss saying what was wrong.
  absl::Status Add(const PullMessage& msg);

  // At the end-of-pull message of a reply at `version` that says it sent
  // `num_chunks` chunks: OK when the copy is now exactly at `version`.
  absl::Status Finish(uint64_t version, uint64_t num_chunks);

  bool received_weights() const { return weights_.has_value(); }
  int64_t updates_applied() const { return updates_; }
  // Bytes of compressed update chunks received.
  int64_t update_bytes() const { return update_bytes_; }
  // With `device`: bytes of the replay plans handed to it.
  int64_t plan_bytes() const { return plan_bytes_; }

 private:
  absl::Status AddUpdateChunk(const TensorChunkView& chunk);
  // A chunk of the exact weights, and the mask of the one just before.
  absl::Status AddWeightChunk(const TensorChunkView& chunk);
  absl::Status AddMaskChunk(const TensorChunkView& chunk);
  // The chunk's bytes in one piece (scratch_ when they straddle slices).
  absl::string_view Joined(const TensorChunkView& chunk);
  // The mask aligned with copy_ + offset, or null (dense).
  const uint8_t* KeepAt(int64_t offset) const {
    return keep_ != nullptr && !keep_->empty() ? keep_->data() + offset
                                               : nullptr;
  }
  // With a runner: replays the kept chunks of the update just completed.
  absl::Status ReplayKept();
  // With `device`: the kept chunks of the update just completed, as a plan.
  absl::Status ReplayOnDevice();
  // The weights are complete: checks them (and uploads them to `device`).
  absl::Status FinishWeights();
  // Whether the update's chunks are kept until its last one.
  bool keeps_chunks() const { return runner_ != nullptr || device_ != nullptr; }

  const ModelLayout* const layout_;
  const FlatRange range_;
  const int64_t max_chunk_elements_;
  const int64_t max_compressed_elements_;
  float* const copy_;
  PartRunner* const runner_;  // null or one part: replay on arrival
  ExactCopy* const device_;   // null: the copy is copy_
  std::vector<uint8_t>* const keep_;  // null: no mask can be replayed
  // The version the copy is at after what arrived so far (unset: weights
  // are expected first).
  std::optional<uint64_t> at_;
  std::optional<ChunkAssembler> weights_;  // while weights arrive
  bool weights_done_ = false;
  // The weight chunk just received (its slice position and size), whose
  // mask may come next; and how many weight chunks had one.
  struct LastChunk {
    std::string tensor;
    uint64_t offset = 0;
    int64_t local = 0;
    int64_t count = 0;
  };
  std::optional<LastChunk> last_weights_;
  int64_t masks_ = 0;
  // The update being received (while update_chunks_left_ > 0): its step.
  std::optional<Optimizer> step_;
  float lr_ = 0.0f, wd_ = 0.0f;  // its rate and decay
  uint64_t update_chunks_left_ = 0;
  uint64_t at_version_pending_ = 0;  // the version the update makes
  int64_t next_offset_ = 0;
  int64_t chunks_ = 0;  // messages with a TensorChunk
  int64_t updates_ = 0;
  int64_t update_bytes_ = 0;
  int64_t plan_bytes_ = 0;
  std::string scratch_;  // a chunk whose bytes straddle slices
  // With a runner or `device`: the current update's chunks, viewing kept_bytes_ (a deque:
  // its strings never move).
  std::deque<std::string> kept_bytes_;
  std::vector<CompressedChunk> kept_;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_DELTA_RECEIVER_H_
