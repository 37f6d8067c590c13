#include "worker/pipeline/stage_wire.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace asgd {
namespace {

// model/backend.h's kNoLabel (kept out of here, so that the fuzz build of
// this file needs no model headers; stage_wire_test checks they agree).
constexpr int32_t kUnlabelled = -1;

// Raw little-endian bytes of `n` elements of T (the hosts asgd runs on are
// little-endian, as for every tensor on asgd's wire).
template <typename T>
void ToBytes(const std::vector<T>& v, std::string* bytes) {
  bytes->resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(bytes->data(), v.data(), bytes->size());
}

template <typename T>
std::vector<T> FromBytes(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

bool AllFinite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace

asgd::v1::StageHello ToHello(const StageGroup& group) {
  asgd::v1::StageHello hello;
  hello.set_stage(group.stage);
  hello.set_num_stages(group.num_stages);
  for (int b : group.bounds) hello.add_bounds(b);
  hello.set_layout_fingerprint(group.layout_fingerprint);
  hello.set_max_rows(group.max_rows);
  hello.set_in_flight(group.in_flight);
  return hello;
}

absl::Status CheckHello(const StageGroup& mine,
                        const asgd::v1::StageHello& theirs) {
  auto differs = [](absl::string_view what, auto a, auto b) {
    return absl::FailedPreconditionError(
        absl::StrCat("the caller's ", what, " is ", a, ", this stage's ", b));
  };
  if (theirs.num_stages() != static_cast<uint32_t>(mine.num_stages)) {
    return differs("number of stages", theirs.num_stages(), mine.num_stages);
  }
  if (theirs.stage() + 1 != static_cast<uint64_t>(mine.stage)) {
    return absl::FailedPreconditionError(
        absl::StrCat("stage ", theirs.stage(), " called stage ", mine.stage,
                     ": only stage ", mine.stage - 1, " feeds it (check "
                     "--next_stage)"));
  }
  std::vector<int> bounds(theirs.bounds().begin(), theirs.bounds().end());
  if (bounds != mine.bounds) {
    return differs("stage plan (layer bounds)", absl::StrJoin(bounds, ","),
                   absl::StrJoin(mine.bounds, ","));
  }
  if (theirs.layout_fingerprint() != mine.layout_fingerprint) {
    return differs("model (layout)", theirs.layout_fingerprint(),
                   mine.layout_fingerprint);
  }
  if (theirs.max_rows() != static_cast<uint32_t>(mine.max_rows)) {
    return differs("rows per minibatch", theirs.max_rows(), mine.max_rows);
  }
  if (theirs.in_flight() < 1 ||
      theirs.in_flight() > static_cast<uint32_t>(mine.in_flight)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the caller keeps ", theirs.in_flight(),
                     " minibatches in flight; this stage takes 1 to ",
                     mine.in_flight, " (check --pipeline_depth)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StageBatch> DecodeActivations(const asgd::v1::Activations& msg,
                                             const ActivationShape& shape,
                                             uint64_t expected_seq) {
  if (msg.seq() != expected_seq) {
    return absl::InvalidArgumentError(absl::StrCat(
        "minibatch ", msg.seq(), " came where ", expected_seq, " was due"));
  }
  const uint64_t rows = uint64_t{msg.sequences()} * msg.steps();
  if (rows == 0 || rows > static_cast<uint64_t>(shape.max_rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat("minibatch ", msg.seq(), " has ", msg.sequences(), " x ",
                     msg.steps(), " rows; want 1 to ", shape.max_rows));
  }
  if (!shape.sequences && msg.steps() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "minibatch ", msg.seq(), " has ", msg.steps(),
        " steps per sequence; a frame model's minibatches have 1"));
  }
  const uint64_t values = rows * shape.width;
  const uint64_t labels = rows * shape.labels_per_row;
  if (msg.values().size() != values * sizeof(float) ||
      msg.labels().size() != labels * sizeof(int32_t)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "minibatch ", msg.seq(), " carries ", msg.values().size(),
        " bytes of values and ", msg.labels().size(),
        " bytes of labels; its ", rows, " rows want ", values * sizeof(float),
        " and ", labels * sizeof(int32_t)));
  }
  StageBatch batch;
  batch.seq = msg.seq();
  batch.sequences = static_cast<int>(msg.sequences());
  batch.steps = static_cast<int>(msg.steps());
  batch.evaluate = msg.evaluate();
  batch.values = FromBytes<float>(msg.values());
  if (!AllFinite(batch.values)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "minibatch ", msg.seq(), " has a NaN or Inf activation"));
  }
  batch.labels = FromBytes<int32_t>(msg.labels());
  for (size_t i = 0; i < batch.labels.size(); ++i) {
    const int32_t label = batch.labels[i];
    if (label != kUnlabelled && (label < 0 || label >= shape.num_classes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("minibatch ", msg.seq(), " label ", i, " is ", label,
                       ", outside [0, ", shape.num_classes, ")"));
    }
  }
  return batch;
}

void EncodeActivations(const StageBatch& batch, asgd::v1::Activations* msg) {
  msg->set_seq(batch.seq);
  msg->set_sequences(batch.sequences);
  msg->set_steps(batch.steps);
  msg->set_evaluate(batch.evaluate);
  ToBytes(batch.values, msg->mutable_values());
  ToBytes(batch.labels, msg->mutable_labels());
}

absl::StatusOr<StageGrad> DecodeBackward(const asgd::v1::StageBackward& msg,
                                         uint64_t expected_seq,
                                         int64_t values,
                                         int64_t max_labelled) {
  if (msg.seq() != expected_seq) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the answer for minibatch ", msg.seq(), " came where ", expected_seq,
        " was due"));
  }
  if (msg.values().size() != static_cast<uint64_t>(values) * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the answer for minibatch ", msg.seq(), " carries ",
                     msg.values().size(), " bytes; want ",
                     values * sizeof(float)));
  }
  if (!std::isfinite(msg.loss()) || msg.loss() < 0 ||
      msg.correct() > msg.labelled() ||
      msg.labelled() > static_cast<uint64_t>(max_labelled)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the answer for minibatch ", msg.seq(), " has loss ", msg.loss(), ", ",
        msg.correct(), " of ", msg.labelled(), " correct"));
  }
  StageGrad grad;
  grad.seq = msg.seq();
  grad.values = FromBytes<float>(msg.values());
  if (!AllFinite(grad.values)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the answer for minibatch ", msg.seq(), " has a NaN or Inf"));
  }
  grad.loss = msg.loss();
  grad.labelled = static_cast<int>(msg.labelled());
  grad.correct = static_cast<int>(msg.correct());
  return grad;
}

void EncodeBackward(const StageGrad& grad, asgd::v1::StageBackward* msg) {
  msg->set_seq(grad.seq);
  ToBytes(grad.values, msg->mutable_values());
  msg->set_loss(grad.loss);
  msg->set_labelled(grad.labelled);
  msg->set_correct(grad.correct);
}

RelayReceiver::RelayReceiver(const StageGroup& mine,
                             const ActivationShape& shape)
    : mine_(mine), shape_(shape) {}

absl::StatusOr<std::optional<StageBatch>> RelayReceiver::Take(
    const asgd::v1::StageForward& msg) {
  if (!error_.ok()) return error_;
  auto next = Next(msg);
  if (!next.ok()) error_ = next.status();
  return next;
}

absl::StatusOr<std::optional<StageBatch>> RelayReceiver::Next(
    const asgd::v1::StageForward& msg) {
  const std::optional<StageBatch> none;
  if (ended_) {
    return absl::InvalidArgumentError("a message came after the stream's end");
  }
  if (!have_hello_) {
    if (!msg.has_hello()) {
      return absl::InvalidArgumentError(
          "the stream must start with a StageHello");
    }
    if (absl::Status s = CheckHello(mine_, msg.hello()); !s.ok()) return s;
    have_hello_ = true;
    window_ = static_cast<int>(msg.hello().in_flight());
    return none;
  }
  if (msg.has_activations()) {
    if (unanswered_ >= window_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "more than ", window_,
          " minibatches in flight: the caller must wait for answers"));
    }
    auto batch = DecodeActivations(msg.activations(), shape_, next_seq_);
    if (!batch.ok()) return batch.status();
    ++next_seq_;
    ++unanswered_;
    return std::optional<StageBatch>(*std::move(batch));
  }
  if (msg.has_end()) {
    if (msg.end().minibatches() != next_seq_) {
      return absl::InvalidArgumentError(
          absl::StrCat("the stream ended after ", msg.end().minibatches(),
                       " minibatches; ", next_seq_, " came"));
    }
    ended_ = true;
    return none;
  }
  return absl::InvalidArgumentError(
      msg.has_hello() ? "a second StageHello" : "an empty StageForward");
}

absl::Status RelayReceiver::Answered() {
  if (unanswered_ == 0) {
    return absl::InvalidArgumentError("an answer with nothing to answer");
  }
  --unanswered_;
  return absl::OkStatus();
}

}  // namespace asgd
