// PullReader: reads one server's reply to one pull (the PullChunk messages
// of a PullStream, already decoded: common/tensor_wire.h DecodePullChunk, or
// ViewOf a parsed message) into a host staging buffer of that server's slice
// (a PullSink's, pull_sink.h).
//
// A reply has one of three forms, each ended by an end-of-pull message that
// says how many chunks were sent:
//   * weights: float32 or bfloat16 chunks tiling the slice
//     (ChunkAssembler checks them, values finite);
//   * exact weights: the same with `exact` set, only for a delta pull, then
//     possibly updates (below); the copy becomes exact;
//   * base + updates: updates only, replayed on the exact copy the request
//     named (DeltaReceiver, delta_receiver.h).
// Every message carries the reply's version. Messages that disagree on the
// version or on `exact`, an exact reply to a plain pull, a chunkless plain
// message, a count that does not match, or anything after the end: DataLoss;
// a malformed chunk: what ChunkAssembler or DeltaReceiver say (DataLoss or
// InvalidArgument); NaN/Inf weights: FailedPrecondition (training diverged).
// After an error the reader refuses everything; the staging buffer may be
// partly written and the copy is lost (its version stays unset).
//
// A delta pull: DeltaCopy is the worker's exact copy of the server's slice.
// BeginDelta() says which version to ask updates for and marks the copy lost
// until Finish() of an exact reply sets it again. A copy kept on a device
// gets its weights through the staging buffer and its updates as replay
// plans; the staging buffer then does not hold the reply's model: the
// caller commits the slice from the copy (PullSink::CommitCopy).
//
// Thread-safety: one thread at a time; a DeltaCopy is used by one reader at
// a time.
#ifndef ASGD_WORKER_PS_PULL_READER_H_
#define ASGD_WORKER_PS_PULL_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/chunking.h"
#include "common/model_layout.h"
#include "common/tensor_messages.h"
#include "model/exact_copy.h"
#include "worker/ps/delta_receiver.h"
#include "worker/ps/part_runner.h"

namespace asgd {

// The worker's copy of one server's slice for delta pulls: host `values`,
// or `device`, a copy kept where the model lives (model/exact_copy.h), made
// by the backend for the slice's size.
struct DeltaCopy {
  int64_t max_compressed_elements = 0;  // the server's compressed chunk limit
  std::vector<float> values;              // empty with `device`
  std::unique_ptr<ExactCopy> device;      // null: the copy is `values`
  // A pruned model's mask over the slice, sent with the exact weights and
  // replayed under (empty: a dense model). A `device` copy holds its own,
  // uploaded with the weights, and this one is emptied then.
  std::vector<uint8_t> keep;
  std::optional<uint64_t> version;  // set while the copy is exactly it
  uint64_t lineage = 0;             // the server's, with `version`

  // Sizes the copy for `range` and returns the version it holds exactly (to
  // ask updates since), marking it lost until an exact reply completes.
  std::optional<uint64_t> BeginDelta(FlatRange range) {
    if (device == nullptr) values.resize(range.size());
    std::optional<uint64_t> held = version;
    version.reset();
    return held;
  }
};

class PullReader {
 public:
  // `staging` holds range.size() floats. `copy`: the server's DeltaCopy for
  // a delta pull (after BeginDelta returned `held`), null for a plain one.
  // `runner` (may be null): splits a delta pull's replay and the copy into
  // staging over its threads (DeltaReceiver); it must outlive the reader.
  PullReader(const ModelLayout* layout, FlatRange range,
             int64_t max_chunk_elements, absl::Span<float> staging,
             DeltaCopy* copy, std::optional<uint64_t> held,
             PartRunner* runner = nullptr);

  // One message of the reply.
  absl::Status Add(const PullMessage& msg);

  // Whether any message arrived, and whether the end-of-pull message did.
  bool started() const { return started_; }
  bool done() const { return done_; }

  // Once done(): completes the reply (an exact one: the copy is exactly at
  // the reply's version and, a host copy, goes into staging) and returns
  // its version.
  absl::StatusOr<uint64_t> Finish();

  // The reply is exact (a delta pull answered with the copy's form).
  bool exact() const { return exact_; }
  // Exact replies: weights were sent (not updates only); update bytes; the
  // bytes of the replay plans handed to a device copy.
  bool received_weights() const;
  int64_t update_bytes() const;
  int64_t plan_bytes() const;

 private:
  absl::Status AddChecked(const PullMessage& msg);

  const FlatRange range_;
  PartRunner* const runner_;  // may be null
  const absl::Span<float> staging_;
  DeltaCopy* const copy_;
  ChunkAssembler assembler_;
  std::optional<DeltaReceiver> receiver_;
  absl::Status error_;
  bool started_ = false;
  bool done_ = false;
  bool exact_ = false;
  uint64_t version_ = 0;
  uint64_t lineage_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_PULL_READER_H_
