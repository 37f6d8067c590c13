// ParamStore's ADMM slots (ParamStoreOptions::admm_slots, consensus
// training): an ADMM push replaces its slot's point in the average the
// weights are, against hand-computed values; slots read back, reset by an
// assign and by a restored snapshot; max_change scales the slot and the
// weights alike; and what is not allowed (no slots, a slot out of range, a
// gradient or add push to a slot store, a compressed or unbounded point) is
// refused and changes nothing.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "server/param_store.h"
#include "server/push_test_cases.h"

namespace asgd {
namespace {

constexpr int kSize = 50;

ParamStoreOptions Options(int slots) {
  ParamStoreOptions o;
  o.tensors = {{"w", {10, 4}}, {"b", {10}}};
  o.num_servers = 1;
  o.server_index = 0;
  o.num_shards = 3;
  o.admm_slots = slots;
  return o;
}

std::unique_ptr<ParamStore> Store(const ParamStoreOptions& o, float w0) {
  auto store = ParamStore::Create(o, std::vector<float>(kSize, w0));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

PushRequest Point(int slot, uint64_t base, std::vector<float> u) {
  PushRequest r;
  r.kind = PushRequest::Kind::kAdmm;
  r.admm_slot = slot;
  r.base_version = base;
  r.values = std::make_shared<const std::vector<float>>(std::move(u));
  return r;
}

std::vector<float> Slot(const ParamStore& ps, int slot) {
  std::vector<float> out(kSize);
  ps.ReadSlotEncoded(slot, 0, kSize, WireDtype::kFloat32,
                     reinterpret_cast<char*>(out.data()));
  return out;
}

std::vector<float> Ramp(float start, float step) {
  std::vector<float> v(kSize);
  for (int i = 0; i < kSize; ++i) v[i] = start + step * i;
  return v;
}

TEST(ParamStoreAdmmTest, TheWeightsAreTheAverageOfTheSlots) {
  auto ps = Store(Options(4), 1.0f);
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(ps->admm_slots(), 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(Slot(*ps, k), ps->Snapshot());
  // Slot 1 moves to 3: w = 1 + (3 - 1) / 4.
  PushResult r =
      SubmitAndWait(*ps, Point(1, 0, std::vector<float>(kSize, 3.0f)));
  ASSERT_TRUE(r.applied) << r.error;
  EXPECT_EQ(r.version, 1u);
  EXPECT_EQ(ps->Snapshot(), std::vector<float>(kSize, 1.5f));
  EXPECT_EQ(Slot(*ps, 1), std::vector<float>(kSize, 3.0f));
  EXPECT_EQ(Slot(*ps, 0), std::vector<float>(kSize, 1.0f));
  // Slot 1 again, now to -1: only the difference to its last point counts.
  r = SubmitAndWait(*ps, Point(1, 1, std::vector<float>(kSize, -1.0f)));
  ASSERT_TRUE(r.applied) << r.error;
  EXPECT_EQ(ps->Snapshot(), std::vector<float>(kSize, 0.5f));  // 1.5 - 4/4
  // Slot 3 with distinct values: (1 + 1 + -1 + u) / 4 element by element.
  const std::vector<float> u = Ramp(-2.0f, 0.25f);
  r = SubmitAndWait(*ps, Point(3, 2, u));
  ASSERT_TRUE(r.applied) << r.error;
  const std::vector<float> w = ps->Snapshot();
  for (int i = 0; i < kSize; ++i) {
    EXPECT_EQ(w[i], 0.5f + (u[i] - 1.0f) / 4) << i;
  }
  EXPECT_EQ(Slot(*ps, 3), u);
  EXPECT_EQ(ps->stats().pushes_applied, 3u);
  EXPECT_EQ(ps->stats().updates_checked, 3u);  // every ADMM update
}

TEST(ParamStoreAdmmTest, MaxChangeScalesTheSlotAndTheWeightsAlike) {
  ParamStoreOptions o = Options(2);
  o.max_change = 0.5;
  auto ps = Store(o, 0.0f);
  ASSERT_NE(ps, nullptr);
  // |u - s| / 2 = 4 > 0.5: scaled to (just under) 1/8 of the step.
  const PushResult r =
      SubmitAndWait(*ps, Point(0, 0, std::vector<float>(kSize, 8.0f)));
  ASSERT_TRUE(r.applied) << r.error;
  const std::vector<float> w = ps->Snapshot();
  const std::vector<float> s = Slot(*ps, 0);
  for (int i = 0; i < kSize; ++i) {
    EXPECT_LE(w[i], 0.5f);
    EXPECT_GT(w[i], 0.4999f);
    EXPECT_EQ(w[i], s[i] / 2);  // still the average of the slots
  }
  EXPECT_EQ(ps->stats().updates_clipped, 1u);
  EXPECT_DOUBLE_EQ(ps->stats().largest_change, 4.0);
}

TEST(ParamStoreAdmmTest, AnAssignAndARestoreResetEverySlot) {
  auto ps = Store(Options(2), 1.0f);
  ASSERT_NE(ps, nullptr);
  ASSERT_TRUE(
      SubmitAndWait(*ps, Point(0, 0, std::vector<float>(kSize, 5.0f))).applied);
  PushRequest assign;
  assign.kind = PushRequest::Kind::kAssign;
  assign.base_version = 1;
  assign.values = std::make_shared<const std::vector<float>>(Ramp(0, 0.5f));
  ASSERT_TRUE(SubmitAndWait(*ps, std::move(assign)).applied);
  EXPECT_EQ(Slot(*ps, 0), Ramp(0, 0.5f));
  EXPECT_EQ(Slot(*ps, 1), Ramp(0, 0.5f));

  auto fresh = Store(Options(2), 1.0f);
  ASSERT_NE(fresh, nullptr);
  StoreSnapshot snapshot;
  snapshot.version = 7;
  snapshot.weights = Ramp(-1.0f, 0.125f);
  ASSERT_TRUE(fresh->Restore(snapshot).ok());
  EXPECT_EQ(Slot(*fresh, 1), snapshot.weights);
}

TEST(ParamStoreAdmmTest, WhatIsNotAllowedIsRefusedAndChangesNothing) {
  auto plain = Store(Options(0), 1.0f);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(SubmitAndWait(*plain, Point(0, 0, std::vector<float>(kSize, 2.0f)))
                .error.code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(plain->Snapshot(), std::vector<float>(kSize, 1.0f));

  auto ps = Store(Options(2), 1.0f);
  ASSERT_NE(ps, nullptr);
  const auto code = [&](PushRequest r) {
    return SubmitAndWait(*ps, std::move(r)).error.code();
  };
  EXPECT_EQ(code(Point(2, 0, std::vector<float>(kSize, 2.0f))),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Point(-1, 0, std::vector<float>(kSize, 2.0f))),
            absl::StatusCode::kInvalidArgument);
  PushRequest gradient = Point(0, 0, std::vector<float>(kSize, 2.0f));
  gradient.kind = PushRequest::Kind::kGradient;
  EXPECT_EQ(code(std::move(gradient)), absl::StatusCode::kFailedPrecondition);
  PushRequest add = Point(0, 0, std::vector<float>(kSize, 2.0f));
  add.kind = PushRequest::Kind::kAdd;
  EXPECT_EQ(code(std::move(add)), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(code(Point(0, 0, std::vector<float>(kSize - 1, 2.0f))),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> nan(kSize, 2.0f);
  nan[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(code(Point(0, 0, nan)), absl::StatusCode::kInvalidArgument);
  // Finite, but past what the server keeps: refused by the shards' check,
  // all or none.
  std::vector<float> huge(kSize, 2.0f);
  huge[kSize - 1] = 1e38f;
  EXPECT_EQ(code(Point(0, 0, huge)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ps->Snapshot(), std::vector<float>(kSize, 1.0f));
  EXPECT_EQ(Slot(*ps, 0), std::vector<float>(kSize, 1.0f));
  EXPECT_EQ(ps->stats().pushes_applied, 0u);
}

TEST(ParamStoreAdmmTest, SlotsAreBoundedAndAsynchronousOnly) {
  std::vector<float> model(kSize, 0.0f);
  ParamStoreOptions o = Options(kMaxAdmmSlots + 1);
  EXPECT_EQ(ParamStore::Create(o, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options(-1);
  EXPECT_EQ(ParamStore::Create(o, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options(2);
  o.sync_workers = 2;
  EXPECT_EQ(ParamStore::Create(o, model).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
