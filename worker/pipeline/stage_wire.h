// What both ends of a Relay stream (proto/pipeline.proto) share: the hello
// that names the pipeline, and the minibatch messages in both directions,
// each decoded with every check a hostile sender calls for. No gRPC here:
// the checks are plain functions (fuzzed in fuzz/stage_fuzzer.cc).
//
// Thread-safety: pure functions.
#ifndef ASGD_WORKER_PIPELINE_STAGE_WIRE_H_
#define ASGD_WORKER_PIPELINE_STAGE_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/pipeline.pb.h"
#include "worker/pipeline/stage_link.h"

namespace asgd {

// The pipeline one stage stream belongs to, as its caller (stage `stage`)
// describes it.
struct StageGroup {
  int stage = 0;
  int num_stages = 1;
  std::vector<int> bounds;  // the StagePlan
  std::string layout_fingerprint;
  int max_rows = 1;
  int in_flight = 1;  // the caller's window
};

asgd::v1::StageHello ToHello(const StageGroup& group);

// What the answering stage (caller + 1) accepts. `mine` is the answering
// stage's own view of the pipeline, with in_flight the most minibatches it
// lets its caller keep in flight. OK when `theirs` comes from stage
// mine.stage - 1 of the same pipeline (stages, plan, model, max_rows) and
// asks for no larger window; FailedPrecondition saying what differs.
absl::Status CheckHello(const StageGroup& mine,
                        const asgd::v1::StageHello& theirs);

// The shape every minibatch of a stream must have.
struct ActivationShape {
  int max_rows = 1;
  int width = 1;            // values per row
  int labels_per_row = 1;   // the model's output_frames
  int num_classes = 1;      // labels are in [0, num_classes) or kNoLabel
  bool sequences = false;   // a recurrent model: steps may exceed 1
};

// The minibatch in `msg`, which must be number `expected_seq`:
// InvalidArgument for another number, no rows or more than max_rows, a
// frame model's steps other than 1, values or labels of another size than
// rows × width and rows × labels_per_row, a NaN or Inf value, a label out
// of range.
absl::StatusOr<StageBatch> DecodeActivations(const asgd::v1::Activations& msg,
                                             const ActivationShape& shape,
                                             uint64_t expected_seq);
void EncodeActivations(const StageBatch& batch, asgd::v1::Activations* msg);

// The answer in `msg` to minibatch `expected_seq`, whose gradient has
// `values` floats and which had at most `max_labelled` labels:
// InvalidArgument for another number or size, a NaN or Inf, a negative
// loss, or more labelled (or correct) outputs than that.
absl::StatusOr<StageGrad> DecodeBackward(const asgd::v1::StageBackward& msg,
                                         uint64_t expected_seq,
                                         int64_t values, int64_t max_labelled);
void EncodeBackward(const StageGrad& grad, asgd::v1::StageBackward* msg);

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_STAGE_WIRE_H_
