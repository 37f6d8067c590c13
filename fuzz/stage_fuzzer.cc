// libFuzzer target: the pipeline's stage-to-stage stream as the answering
// stage sees it (worker/pipeline/stage_wire.h): a RelayReceiver fed a
// sequence of messages and answers that come from the input, and the
// answers (StageBackward) a stage decodes.
//
// Encoding (ByteReader, front to back; missing bytes read as 0):
//   u8 max_rows (1 + v % 8), u8 width (1 + v % 6), u8 labels per row
//   (1 + v % 3), u8 classes (1 + v % 6), u8 flags (bit 0: a sequence
//   model), u8 window (1 + v % 4): the answering stage's shape and the most
//   minibatches it lets its caller keep unanswered. The stage is stage 1 of
//   2, plan {0, 1, 2}, model "f". Then operations until the input ends,
//   u8 op, op % kNumStageOps (fuzz_common.h):
//   kStageHello:  u8 a (bit 0: another stage, bit 1: another stage count,
//                 bit 2: another plan, bit 3: another model, bit 4: other
//                 max_rows), u8 in_flight (v % 6).
//   kStageBatch:  u8 flags (bit 0: seq u64, else the next one; bit 1:
//                 an evaluate minibatch), [seq],
//                 u8 sequences (v % 6), u8 steps (v % 3), s8 value count
//                 change, s8 label count change, then per value u8 (255:
//                 NaN, 254: Inf, else v / 16 - 8), per label u8 (v - 2).
//   kStageEnd:    u8 flags (bit 0: u16 count, else the received count).
//   kStageAnswer: the stage answers (RelayReceiver::Answered), and decodes
//                 a StageBackward: u16 length, that many bytes, for a
//                 minibatch of u8 % 9 rows of width values.
//   kStageRaw:    u16 length, that many bytes parsed as a StageForward (a
//                 record that does not parse ends the stream, as a broken
//                 gRPC stream would).
// Properties: an accepted minibatch is the next in order, has 1 to
// max_rows rows (steps 1 for a frame model), exactly rows x width finite
// values and rows x labels-per-row labels, each a class or -1; never more
// than the hello's window (itself at most the stage's) are unanswered;
// after an error every message fails with it; after the end nothing is
// accepted; an answer is refused exactly when nothing is unanswered. An
// accepted StageBackward has the size asked for, finite values, a finite
// loss >= 0 and correct <= labelled <= the rows' labels.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "proto/pipeline.pb.h"
#include "worker/pipeline/stage_wire.h"

namespace asgd {
namespace fuzz {
namespace {

using asgd::v1::StageForward;

float ValueOf(uint8_t v) {
  if (v == 255) return std::numeric_limits<float>::quiet_NaN();
  if (v == 254) return std::numeric_limits<float>::infinity();
  return static_cast<float>(v) / 16.0f - 8.0f;
}

StageForward Hello(ByteReader& in, const StageGroup& mine) {
  const uint8_t a = in.U8();
  StageGroup g = mine;
  g.stage = (a & 1) ? in.U8() % 3 : mine.stage - 1;
  if (a & 2) g.num_stages = 3;
  if (a & 4) g.bounds = {0, 2, 2};
  if (a & 8) g.layout_fingerprint = "g";
  if (a & 16) g.max_rows = mine.max_rows + 1;
  g.in_flight = in.U8() % 6;
  StageForward m;
  *m.mutable_hello() = ToHello(g);
  return m;
}

StageForward Batch(ByteReader& in, const ActivationShape& shape,
                   uint64_t next) {
  const uint8_t flags = in.U8();
  StageForward m;
  auto* a = m.mutable_activations();
  a->set_seq((flags & 1) ? in.U64() : next);
  a->set_evaluate((flags & 2) != 0);
  a->set_sequences(in.U8() % 6);
  a->set_steps(in.U8() % 3);
  const int64_t rows = int64_t{a->sequences()} * a->steps();
  const int64_t values =
      std::max<int64_t>(0, rows * shape.width + static_cast<int8_t>(in.U8()));
  const int64_t labels = std::max<int64_t>(
      0, rows * shape.labels_per_row + static_cast<int8_t>(in.U8()));
  std::vector<float> v(values);
  for (float& x : v) x = ValueOf(in.U8());
  std::vector<int32_t> l(labels);
  for (int32_t& x : l) x = static_cast<int32_t>(in.U8()) - 2;
  a->mutable_values()->assign(reinterpret_cast<const char*>(v.data()),
                              v.size() * sizeof(float));
  a->mutable_labels()->assign(reinterpret_cast<const char*>(l.data()),
                              l.size() * sizeof(int32_t));
  return m;
}

void CheckAnswer(ByteReader& in, const ActivationShape& shape) {
  const std::string bytes = in.Bytes(in.U16());
  const int64_t rows = in.U8() % 9;
  asgd::v1::StageBackward msg;
  if (!msg.ParseFromString(bytes)) return;
  auto grad = DecodeBackward(msg, msg.seq(), rows * shape.width,
                             rows * shape.labels_per_row);
  if (!grad.ok()) {
    FUZZ_CHECK(grad.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(static_cast<int64_t>(grad->values.size()) == rows * shape.width);
  for (float x : grad->values) FUZZ_CHECK(std::isfinite(x));
  FUZZ_CHECK(std::isfinite(grad->loss) && grad->loss >= 0);
  FUZZ_CHECK(grad->correct >= 0 && grad->correct <= grad->labelled);
  FUZZ_CHECK(grad->labelled <= rows * shape.labels_per_row);
}

void CheckBatch(const StageBatch& b, const ActivationShape& shape,
                uint64_t seq) {
  FUZZ_CHECK(b.seq == seq);
  FUZZ_CHECK(b.sequences >= 1 && b.steps >= 1);
  FUZZ_CHECK(b.rows() <= shape.max_rows);
  FUZZ_CHECK(shape.sequences || b.steps == 1);
  FUZZ_CHECK(static_cast<int64_t>(b.values.size()) ==
             int64_t{b.rows()} * shape.width);
  FUZZ_CHECK(static_cast<int64_t>(b.labels.size()) ==
             int64_t{b.rows()} * shape.labels_per_row);
  for (float x : b.values) FUZZ_CHECK(std::isfinite(x));
  for (int32_t l : b.labels) {
    FUZZ_CHECK(l == -1 || (l >= 0 && l < shape.num_classes));
  }
}

void Run(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  ActivationShape shape;
  shape.max_rows = 1 + in.U8() % 8;
  shape.width = 1 + in.U8() % 6;
  shape.labels_per_row = 1 + in.U8() % 3;
  shape.num_classes = 1 + in.U8() % 6;
  shape.sequences = (in.U8() & 1) != 0;
  StageGroup mine;
  mine.stage = 1;
  mine.num_stages = 2;
  mine.bounds = {0, 1, 2};
  mine.layout_fingerprint = "f";
  mine.max_rows = shape.max_rows;
  mine.in_flight = 1 + in.U8() % 4;
  RelayReceiver receiver(mine, shape);
  absl::Status error;
  while (!in.empty()) {
    const uint8_t op = in.U8() % kNumStageOps;
    StageForward msg;
    switch (op) {
      case kStageHello:
        msg = Hello(in, mine);
        break;
      case kStageBatch:
        msg = Batch(in, shape, receiver.received());
        break;
      case kStageEnd:
        msg.mutable_end()->set_minibatches(
            (in.U8() & 1) ? in.U16() : receiver.received());
        break;
      case kStageAnswer: {
        const int64_t before = receiver.unanswered();
        const absl::Status s = receiver.Answered();
        FUZZ_CHECK(s.ok() == (before > 0));
        FUZZ_CHECK(receiver.unanswered() == (before > 0 ? before - 1 : 0));
        CheckAnswer(in, shape);
        continue;
      }
      default:
        if (!msg.ParseFromString(in.Bytes(in.U16()))) return;
        break;
    }
    const bool was_ended = receiver.ended();
    const uint64_t seq = receiver.received();
    auto got = receiver.Take(msg);
    if (!error.ok()) {
      // Sticky: the stream already failed.
      FUZZ_CHECK(!got.ok() && got.status() == error);
      continue;
    }
    if (!got.ok()) {
      const auto code = got.status().code();
      FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
                 code == absl::StatusCode::kFailedPrecondition ||
                 code == absl::StatusCode::kResourceExhausted);
      FUZZ_CHECK(receiver.received() == seq);
      error = got.status();
      continue;
    }
    FUZZ_CHECK(!was_ended);
    if (got->has_value()) {
      CheckBatch(**got, shape, seq);
      FUZZ_CHECK(receiver.received() == seq + 1);
    } else {
      FUZZ_CHECK(receiver.received() == seq);
    }
    FUZZ_CHECK(receiver.window() <= mine.in_flight);
    FUZZ_CHECK(receiver.unanswered() <= receiver.window());
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace asgd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  asgd::fuzz::Run(data, size);
  return 0;
}
