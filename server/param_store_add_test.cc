// ParamStore's add pushes (PushRequest::Kind::kAdd, consensus training):
// the values are added as they are, the optimizer state is untouched, the
// mask, max_change, staleness and finiteness rules hold, and what is not
// allowed is refused and changes nothing.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "server/param_store.h"
#include "server/push_test_cases.h"
#include "step/compressed_apply.h"

namespace asgd {
namespace {

ParamStoreOptions Options() {
  ParamStoreOptions o;
  o.tensors = {{"w", {10, 4}}, {"b", {10}}};
  o.num_servers = 1;
  o.server_index = 0;
  o.num_shards = 3;
  o.optimizer.learning_rate = 0.125f;  // powers of two: exact float sums
  return o;
}

std::unique_ptr<ParamStore> Store(const ParamStoreOptions& o, float w0) {
  auto store = ParamStore::Create(o, std::vector<float>(50, w0));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

PushRequest Request(PushRequest::Kind kind, uint64_t base, float value) {
  PushRequest r;
  r.kind = kind;
  r.base_version = base;
  r.values = std::make_shared<const std::vector<float>>(50, value);
  return r;
}

TEST(ParamStoreAddTest, AddsTheValuesAndLeavesMomentumAlone) {
  ParamStoreOptions o = Options();
  o.optimizer.momentum = 0.5f;
  auto ps = Store(o, 1.0f);
  ASSERT_NE(ps, nullptr);
  // v = 1, w = 1 - 0.125 * 1.
  ASSERT_TRUE(
      SubmitAndWait(*ps, Request(PushRequest::Kind::kGradient, 0, 1.0f))
          .applied);
  const PushResult added =
      SubmitAndWait(*ps, Request(PushRequest::Kind::kAdd, 1, 0.25f));
  EXPECT_TRUE(added.applied) << added.error;
  EXPECT_EQ(added.version, 2u);
  EXPECT_EQ(ps->Snapshot(), std::vector<float>(50, 1.125f));
  // v = 0.5 * 1 + 1 = 1.5 (an add that reset v would give v = 1),
  // w = 1.125 - 0.125 * 1.5.
  ASSERT_TRUE(
      SubmitAndWait(*ps, Request(PushRequest::Kind::kGradient, 2, 1.0f))
          .applied);
  EXPECT_EQ(ps->Snapshot(), std::vector<float>(50, 0.9375f));
  EXPECT_EQ(ps->version(), 3u);
}

TEST(ParamStoreAddTest, NoLearningRateOrMinibatchScale) {
  ParamStoreOptions o = Options();
  auto ps = Store(o, 0.0f);
  ASSERT_NE(ps, nullptr);
  PushRequest r = Request(PushRequest::Kind::kAdd, 0, -0.75f);
  r.num_minibatches = 4;
  ASSERT_TRUE(SubmitAndWait(*ps, std::move(r)).applied);
  EXPECT_EQ(ps->Snapshot(), std::vector<float>(50, -0.75f));
}

TEST(ParamStoreAddTest, PrunedWeightsStayZero) {
  ParamStoreOptions o = Options();
  auto keep = std::make_shared<std::vector<uint8_t>>(50, 1);
  for (int i = 0; i < 50; i += 3) (*keep)[i] = 0;
  o.keep = keep;
  std::vector<float> initial(50, 2.0f);
  for (int i = 0; i < 50; i += 3) initial[i] = 0.0f;
  auto created = ParamStore::Create(o, initial);
  ASSERT_TRUE(created.ok()) << created.status();
  ParamStore& ps = **created;
  ASSERT_TRUE(
      SubmitAndWait(ps, Request(PushRequest::Kind::kAdd, 0, 1.5f)).applied);
  const std::vector<float> now = ps.Snapshot();
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(now[i], i % 3 == 0 ? 0.0f : 3.5f) << i;
  }
}

TEST(ParamStoreAddTest, ScaledDownToMaxChange) {
  ParamStoreOptions o = Options();
  o.max_change = 0.5;
  auto ps = Store(o, 1.0f);
  ASSERT_NE(ps, nullptr);
  ASSERT_TRUE(
      SubmitAndWait(*ps, Request(PushRequest::Kind::kAdd, 0, 4.0f)).applied);
  for (float w : ps->Snapshot()) {
    EXPECT_LE(w - 1.0f, 0.5f);
    EXPECT_GT(w - 1.0f, 0.49f);
  }
  EXPECT_EQ(ps->stats().updates_clipped, 1u);
  // Within the bound: as it is.
  ASSERT_TRUE(
      SubmitAndWait(*ps, Request(PushRequest::Kind::kAdd, 1, 0.25f)).applied);
  EXPECT_EQ(ps->stats().updates_clipped, 1u);
}

TEST(ParamStoreAddTest, TooStaleIsDroppedAndChangesNothing) {
  ParamStoreOptions o = Options();
  o.max_staleness = 1;
  auto ps = Store(o, 1.0f);
  ASSERT_NE(ps, nullptr);
  for (uint64_t v = 0; v < 3; ++v) {
    ASSERT_TRUE(
        SubmitAndWait(*ps, Request(PushRequest::Kind::kGradient, v, 1.0f))
            .applied);
  }
  const std::vector<float> before = ps->Snapshot();
  const PushResult r =
      SubmitAndWait(*ps, Request(PushRequest::Kind::kAdd, 1, 1.0f));
  EXPECT_FALSE(r.applied);
  EXPECT_TRUE(r.error.ok());
  EXPECT_EQ(r.staleness, 2u);
  EXPECT_EQ(ps->Snapshot(), before);
  EXPECT_EQ(ps->stats().pushes_dropped_stale, 1u);
  // Fresh enough: applied, staleness reported.
  const PushResult fresh =
      SubmitAndWait(*ps, Request(PushRequest::Kind::kAdd, 2, 1.0f));
  EXPECT_TRUE(fresh.applied);
  EXPECT_EQ(fresh.staleness, 1u);
}

TEST(ParamStoreAddTest, RefusalsChangeNothing) {
  ParamStoreOptions sync = Options();
  sync.sync_workers = 2;
  auto sync_ps = Store(sync, 1.0f);
  ASSERT_NE(sync_ps, nullptr);
  EXPECT_EQ(
      SubmitAndWait(*sync_ps, Request(PushRequest::Kind::kAdd, 0, 1.0f))
          .error.code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sync_ps->accepted(), 0u);

  auto ps = Store(Options(), 1.0f);
  ASSERT_NE(ps, nullptr);
  PushRequest compressed;
  compressed.kind = PushRequest::Kind::kAdd;
  compressed.compressed = std::make_shared<CompressedGradient>();
  EXPECT_EQ(SubmitAndWait(*ps, std::move(compressed)).error.code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SubmitAndWait(*ps, Request(PushRequest::Kind::kAdd, 0,
                                       std::numeric_limits<float>::infinity()))
                .error.code(),
            absl::StatusCode::kInvalidArgument);
  PushRequest short_add = Request(PushRequest::Kind::kAdd, 0, 1.0f);
  short_add.values = std::make_shared<const std::vector<float>>(49, 1.0f);
  EXPECT_EQ(SubmitAndWait(*ps, std::move(short_add)).error.code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ps->accepted(), 0u);
  EXPECT_EQ(ps->Snapshot(), std::vector<float>(50, 1.0f));
}

TEST(ParamStoreAddTest, AnAddThatWouldLeaveTheBoundIsRefusedOnEveryShard) {
  const float big = static_cast<float>(kMaxMagnitude * 0.75);
  auto ps = Store(Options(), big);
  ASSERT_NE(ps, nullptr);
  const PushResult r = SubmitAndWait(*ps, Request(PushRequest::Kind::kAdd, 0,
                                                  big * 0.5f));
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument) << r.error;
  EXPECT_EQ(ps->Snapshot(), std::vector<float>(50, big));
  EXPECT_EQ(ps->stats().updates_checked, 1u);
  // One that stays within it passes the same check.
  const PushResult ok = SubmitAndWait(*ps, Request(PushRequest::Kind::kAdd, 1,
                                                   -big * 0.5f));
  EXPECT_TRUE(ok.applied) << ok.error;
  EXPECT_EQ(ps->Snapshot(), std::vector<float>(50, big - big * 0.5f));
}

}  // namespace
}  // namespace asgd
