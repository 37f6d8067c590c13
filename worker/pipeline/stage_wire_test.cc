// The Relay stream's messages: round trips, and every malformed message or
// mismatched hello refused with its code and nothing decoded.
#include "worker/pipeline/stage_wire.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"
#include "model/backend.h"

namespace asgd {
namespace {

ActivationShape Shape() {
  ActivationShape s;
  s.max_rows = 4;
  s.width = 3;
  s.labels_per_row = 1;
  s.num_classes = 5;
  return s;
}

StageBatch Batch2() {
  StageBatch b;
  b.seq = 7;
  b.sequences = 2;
  b.steps = 1;
  b.values = {1, 2, 3, -4, 5.5f, 0};
  b.labels = {4, kNoLabel};
  return b;
}

TEST(StageWireTest, ActivationsRoundTrip) {
  asgd::v1::Activations msg;
  StageBatch eval = Batch2();
  eval.evaluate = true;
  EncodeActivations(eval, &msg);
  auto evaluated = DecodeActivations(msg, Shape(), 7);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_TRUE(evaluated->evaluate);
  EncodeActivations(Batch2(), &msg);
  auto got = DecodeActivations(msg, Shape(), 7);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->evaluate);
  EXPECT_EQ(got->seq, 7u);
  EXPECT_EQ(got->sequences, 2);
  EXPECT_EQ(got->values, Batch2().values);
  EXPECT_EQ(got->labels, Batch2().labels);
}

TEST(StageWireTest, MalformedActivationsRefused) {
  const auto refused = [](const asgd::v1::Activations& msg,
                          const ActivationShape& shape, uint64_t seq) {
    auto got = DecodeActivations(msg, shape, seq);
    return !got.ok() &&
           got.status().code() == absl::StatusCode::kInvalidArgument;
  };
  asgd::v1::Activations good;
  EncodeActivations(Batch2(), &good);
  EXPECT_TRUE(refused(good, Shape(), 6));  // out of order

  asgd::v1::Activations m = good;
  m.set_sequences(0);
  EXPECT_TRUE(refused(m, Shape(), 7));  // no rows
  m = good;
  m.set_sequences(5);
  EXPECT_TRUE(refused(m, Shape(), 7));  // more than max_rows
  m = good;
  m.set_sequences(1u << 31);
  m.set_steps(1u << 31);
  EXPECT_TRUE(refused(m, Shape(), 7));  // rows overflow 32 bits
  m = good;
  m.set_steps(2);
  m.set_sequences(1);
  EXPECT_TRUE(refused(m, Shape(), 7));  // steps for a frame model
  m = good;
  m.mutable_values()->pop_back();
  EXPECT_TRUE(refused(m, Shape(), 7));  // short values
  m = good;
  m.mutable_labels()->append("1234");
  EXPECT_TRUE(refused(m, Shape(), 7));  // a label too many
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    m = good;
    std::memcpy(m.mutable_values()->data() + 4, &bad, 4);
    EXPECT_TRUE(refused(m, Shape(), 7));
  }
  for (int32_t bad : {5, -2}) {
    m = good;
    std::memcpy(m.mutable_labels()->data(), &bad, 4);
    EXPECT_TRUE(refused(m, Shape(), 7));
  }
  // A sequence model takes steps.
  ActivationShape seq = Shape();
  seq.sequences = true;
  m = good;
  m.set_sequences(1);
  m.set_steps(2);
  EXPECT_TRUE(DecodeActivations(m, seq, 7).ok());
}

TEST(StageWireTest, BackwardChecked) {
  StageGrad g;
  g.seq = 3;
  g.values = {0.5f, -1};
  g.loss = 1.25;
  g.labelled = 2;
  g.correct = 1;
  asgd::v1::StageBackward msg;
  EncodeBackward(g, &msg);
  auto got = DecodeBackward(msg, 3, 2, 2);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->values, g.values);
  EXPECT_EQ(got->loss, 1.25);
  EXPECT_EQ(got->correct, 1);

  EXPECT_EQ(DecodeBackward(msg, 4, 2, 2).status().code(),
            absl::StatusCode::kInvalidArgument);  // another minibatch
  EXPECT_EQ(DecodeBackward(msg, 3, 3, 2).status().code(),
            absl::StatusCode::kInvalidArgument);  // another size
  EXPECT_EQ(DecodeBackward(msg, 3, 2, 1).status().code(),
            absl::StatusCode::kInvalidArgument);  // more labelled than rows
  // An evaluation's answer has no values.
  asgd::v1::StageBackward counts = msg;
  counts.clear_values();
  EXPECT_TRUE(DecodeBackward(counts, 3, 0, 2).ok());
  EXPECT_FALSE(DecodeBackward(msg, 3, 0, 2).ok());
  asgd::v1::StageBackward m = msg;
  m.set_correct(3);
  EXPECT_FALSE(DecodeBackward(m, 3, 2, 2).ok());
  m = msg;
  m.set_loss(std::nan(""));
  EXPECT_FALSE(DecodeBackward(m, 3, 2, 2).ok());
  m = msg;
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(m.mutable_values()->data(), &inf, 4);
  EXPECT_FALSE(DecodeBackward(m, 3, 2, 2).ok());
}

TEST(StageWireTest, HelloMustMatch) {
  StageGroup mine;
  mine.stage = 2;
  mine.num_stages = 3;
  mine.bounds = {0, 1, 3, 4};
  mine.layout_fingerprint = "abc";
  mine.max_rows = 64;
  mine.in_flight = 2;
  StageGroup caller = mine;
  caller.stage = 1;
  EXPECT_TRUE(CheckHello(mine, ToHello(caller)).ok());
  caller.in_flight = 1;
  EXPECT_TRUE(CheckHello(mine, ToHello(caller)).ok());

  auto refused = [&mine](StageGroup g) {
    return CheckHello(mine, ToHello(g)).code() ==
           absl::StatusCode::kFailedPrecondition;
  };
  StageGroup g = mine;
  g.stage = 1;
  g.in_flight = 3;
  EXPECT_TRUE(refused(g));  // a larger window than this stage allows
  g.in_flight = 0;
  EXPECT_TRUE(refused(g));
  g = mine;
  g.stage = 0;
  EXPECT_TRUE(refused(g));  // not the previous stage
  g.stage = 2;
  EXPECT_TRUE(refused(g));
  g = mine;
  g.stage = 1;
  g.num_stages = 4;
  EXPECT_TRUE(refused(g));
  g = mine;
  g.stage = 1;
  g.bounds = {0, 2, 3, 4};
  EXPECT_TRUE(refused(g));
  g = mine;
  g.stage = 1;
  g.layout_fingerprint = "abd";
  EXPECT_TRUE(refused(g));
  g = mine;
  g.stage = 1;
  g.max_rows = 32;
  EXPECT_TRUE(refused(g));
}

}  // namespace
}  // namespace asgd
