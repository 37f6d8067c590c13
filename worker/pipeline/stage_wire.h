// What both ends of a Relay stream (proto/pipeline.proto) share: the hello
// that names the pipeline, and the minibatch messages in both directions,
// each decoded with every check a hostile sender calls for. No gRPC here:
// the checks are plain functions (fuzzed in fuzz/stage_fuzzer.cc).
//
// Thread-safety: pure functions.
#ifndef ASGD_WORKER_PIPELINE_STAGE_WIRE_H_
#define ASGD_WORKER_PIPELINE_STAGE_WIRE_H_

#include <cstdint>
#include <optional>
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
// `values` floats (0 for an evaluate minibatch) and which had at most
// `max_labelled` labels:
// InvalidArgument for another number or size, a NaN or Inf, a negative
// loss, or more labelled (or correct) outputs than that.
absl::StatusOr<StageGrad> DecodeBackward(const asgd::v1::StageBackward& msg,
                                         uint64_t expected_seq,
                                         int64_t values, int64_t max_labelled);
void EncodeBackward(const StageGrad& grad, asgd::v1::StageBackward* msg);

// The answering stage's side of one Relay stream, message by message: the
// hello first (CheckHello), then minibatches in order (DecodeActivations),
// at most the hello's window of them unanswered, then one StageEnd that
// counts them, then nothing. Holds no minibatch: at most `window` of them
// are alive at once in whoever Take() hands them to.
class RelayReceiver {
 public:
  // `mine` is the answering stage's view (CheckHello), `shape` its input.
  RelayReceiver(const StageGroup& mine, const ActivationShape& shape);

  // The next message: a minibatch (hello and end: nullopt), or the error
  // that ends the stream: FailedPrecondition for a hello that does not
  // match; ResourceExhausted for a minibatch past the window;
  // InvalidArgument for anything else out of place or malformed. After an
  // error every call fails with it.
  absl::StatusOr<std::optional<StageBatch>> Take(
      const asgd::v1::StageForward& msg);
  // One minibatch was answered. InvalidArgument when none is unanswered.
  absl::Status Answered();

  bool ended() const { return ended_; }
  uint64_t received() const { return next_seq_; }
  int64_t unanswered() const { return unanswered_; }
  // The window the hello asked for (0 before it).
  int window() const { return window_; }

 private:
  absl::StatusOr<std::optional<StageBatch>> Next(
      const asgd::v1::StageForward& msg);

  const StageGroup mine_;
  const ActivationShape shape_;
  absl::Status error_;
  bool have_hello_ = false;
  bool ended_ = false;
  int window_ = 0;
  uint64_t next_seq_ = 0;
  int64_t unanswered_ = 0;
};

}  // namespace asgd

#endif  // ASGD_WORKER_PIPELINE_STAGE_WIRE_H_
