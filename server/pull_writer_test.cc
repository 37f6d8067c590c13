#include "server/pull_writer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "compression/grad_codec.h"
#include "gtest/gtest.h"
#include "step/compressed_apply.h"
#include "server/delta_pulls.h"
#include "server/push_test_cases.h"

namespace asgd {
namespace {

constexpr int64_t kChunk = 64;

ParamStoreOptions SmallStore() {
  ParamStoreOptions o;
  o.tensors = {{"w", {100, 3}}, {"b", {50}}};
  o.optimizer.learning_rate = 0.125f;
  o.max_chunk_elements = kChunk;
  return o;
}

std::vector<float> Initial() {
  std::vector<float> w(350);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * i;
  return w;
}

// The data bytes a message's `fill` writes.
std::string Data(const PullPart& m) {
  const int64_t size = m.kind == PullPart::Kind::kChunk
                           ? m.count * WireBytes(m.dtype)
                           : m.data_bytes;
  std::string out(size, '\0');
  m.fill(out.data());
  return out;
}

// The float32 weights the messages before the end carry, in flat order
// (tensor "w" then "b"), checking the chunking.
std::vector<float> Weights(const std::vector<PullPart>& parts) {
  std::vector<float> w;
  for (const PullPart& m : parts) {
    if (m.kind == PullPart::Kind::kEndOfPull) break;
    const std::string data = Data(m);
    EXPECT_LE(data.size(), kChunk * sizeof(float));
    const int64_t base = m.tensor == "w" ? 0 : 300;
    EXPECT_EQ(base + static_cast<int64_t>(m.offset),
              static_cast<int64_t>(w.size()));
    const size_t n = data.size() / sizeof(float);
    w.resize(w.size() + n);
    std::memcpy(w.data() + w.size() - n, data.data(), data.size());
  }
  return w;
}

std::vector<PullPart> Drain(PullWriter* writer) {
  std::vector<PullPart> parts;
  PullPart m;
  while (writer->Next(&m)) {
    parts.push_back(m);
    // `fill` must run before the next Next(): keep the bytes now.
    if (m.fill) {
      auto data = std::make_shared<std::string>(Data(m));
      parts.back().fill = [data](char* out) {
        std::memcpy(out, data->data(), data->size());
      };
    }
  }
  return parts;
}

// A top-k compressed gradient of the whole range in chunks of kChunk, its
// bytes end to end as a push assembler leaves them (what the log keeps).
std::shared_ptr<const CompressedGradient> TopK(int64_t n, std::string* bytes) {
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = (i % 3 == 0) ? 1.0f : -0.5f;
  std::shared_ptr<const CompressedGradient> gradient =
      TopKGradient(g, kChunk, 0.05);
  EXPECT_NE(gradient, nullptr);
  if (gradient != nullptr) *bytes = std::string(gradient->encoded);
  return gradient;
}

// The plan DeltaPulls::RequestBase gives (nullopt: weights, or none within
// 30 s).
std::optional<DeltaPlan> BasePlan(DeltaPulls* delta) {
  struct Answer {  // shared: the callback may come after a timeout
    absl::Notification ready;
    std::optional<DeltaPlan> plan;
  };
  auto answer = std::make_shared<Answer>();
  delta->RequestBase([answer](std::optional<DeltaPlan> p) {
    answer->plan = std::move(p);
    answer->ready.Notify();
  });
  if (!answer->ready.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    ADD_FAILURE() << "no base within 30 s";
    return std::nullopt;
  }
  return std::move(answer->plan);
}

void PushCompressed(ParamStore* store,
                    std::shared_ptr<const CompressedGradient> g) {
  PushRequest r;
  r.base_version = store->version();
  r.compressed = std::move(g);
  absl::Notification done;
  PushResult result;
  ASSERT_TRUE(store
                  ->Submit(std::move(r),
                           [&](const PushResult& res) {
                             result = res;
                             done.Notify();
                           })
                  .ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(result.applied);
}

TEST(PullWriterTest, WeightsOfASmallStoreChunkByChunkThenTheEnd) {
  auto store = ParamStore::Create(SmallStore(), Initial());
  ASSERT_TRUE(store.ok()) << store.status();
  PullWriter writer(store->get(), nullptr, 0, WireDtype::kFloat32,
                    /*end_marker=*/true);
  const std::vector<PullPart> parts = Drain(&writer);
  // "w" (300 elements) in 5 chunks, "b" (50) in 1, then the end.
  ASSERT_EQ(parts.size(), 7u);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    EXPECT_EQ(parts[i].kind, PullPart::Kind::kChunk);
    EXPECT_EQ(parts[i].model_version, 0u);
  }
  EXPECT_EQ(Weights(parts), Initial());
  const PullPart& end = parts.back();
  EXPECT_EQ(end.kind, PullPart::Kind::kEndOfPull);
  EXPECT_EQ(end.num_chunks, 6u);
  EXPECT_FALSE(end.exact);
  EXPECT_EQ((*store)->stats().pulls, 1u);

  // Without the end marker the pull ends with its last chunk.
  PullWriter plain(store->get(), nullptr, 0, WireDtype::kBfloat16,
                   /*end_marker=*/false);
  const std::vector<PullPart> chunks = Drain(&plain);
  ASSERT_EQ(chunks.size(), 6u);
  EXPECT_EQ(Data(chunks[0]).size(), kChunk * 2u);  // bfloat16
}

TEST(PullWriterTest, DeltaRequestIsAnsweredWithTheUpdatesOnly) {
  auto store = ParamStore::Create(SmallStore(), Initial());
  ASSERT_TRUE(store.ok()) << store.status();
  ParamStore& ps = **store;
  ASSERT_NE(ps.update_log(), nullptr);
  std::string bytes;
  PushCompressed(&ps, TopK(ps.range().size(), &bytes));
  DeltaPulls delta(&ps, int64_t{1} << 20);
  DeltaPlan plan;
  ASSERT_EQ(delta.Plan(/*has_copy=*/true, /*held=*/0, delta.lineage(),
                       /*replays_mask=*/false, &plan),
            DeltaPulls::Answer::kPlan);
  EXPECT_EQ(plan.base, nullptr);
  PullWriter writer(&ps, nullptr, std::move(plan), delta.lineage());
  const std::vector<PullPart> parts = Drain(&writer);
  // The update's header, its 6 compressed chunks, the end.
  ASSERT_EQ(parts.size(), 8u);
  EXPECT_EQ(parts[0].kind, PullPart::Kind::kUpdateHeader);
  EXPECT_EQ(parts[0].update_version, 1u);
  EXPECT_EQ(parts[0].num_chunks, 6u);
  EXPECT_EQ(parts[0].learning_rate, 0.125f);
  std::string sent;
  for (size_t i = 1; i < 7; ++i) {
    EXPECT_EQ(parts[i].kind, PullPart::Kind::kExactChunk);
    EXPECT_EQ(parts[i].dtype_value, static_cast<int>(PushEncoding::kTopK));
    EXPECT_EQ(parts[i].offset, (i - 1) * kChunk);
    EXPECT_TRUE(parts[i].tensor.empty());
    sent += Data(parts[i]);
  }
  EXPECT_EQ(sent, bytes);  // the logged bytes, as they were pushed
  EXPECT_EQ(parts[7].kind, PullPart::Kind::kEndOfPull);
  EXPECT_TRUE(parts[7].exact);
  EXPECT_EQ(parts[7].lineage, delta.lineage());
  EXPECT_EQ(parts[7].num_chunks, 6u);
  EXPECT_EQ(parts[7].model_version, 1u);
}

// A request from another server process (another lineage) must get weights:
// exact ones on a consistent base when memory allows, plain ones otherwise.
TEST(PullWriterTest, RequestFromAnotherLineageGetsWeights) {
  auto store = ParamStore::Create(SmallStore(), Initial());
  ASSERT_TRUE(store.ok()) << store.status();
  ParamStore& ps = **store;
  std::string bytes;
  PushCompressed(&ps, TopK(ps.range().size(), &bytes));
  const std::vector<float> now = ps.Snapshot();

  DeltaPulls delta(&ps, int64_t{1} << 20);
  DeltaPlan unused;
  ASSERT_EQ(delta.Plan(true, 0, delta.lineage() + 1, false, &unused),
            DeltaPulls::Answer::kNeedBase);
  std::optional<DeltaPlan> plan = BasePlan(&delta);
  ASSERT_TRUE(plan.has_value());
  ASSERT_NE(plan->base, nullptr);
  PullWriter exact(&ps, nullptr, std::move(*plan), delta.lineage());
  const std::vector<PullPart> parts = Drain(&exact);
  ASSERT_EQ(parts.size(), 7u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(parts[i].kind, PullPart::Kind::kExactChunk);
    EXPECT_EQ(parts[i].dtype_value, static_cast<int>(WireDtype::kFloat32));
  }
  EXPECT_EQ(Weights(parts), now);
  EXPECT_TRUE(parts.back().exact);
  EXPECT_EQ(parts.back().lineage, delta.lineage());

  // No memory for a base: plain weights.
  DeltaPulls no_memory(&ps, 0);
  absl::Notification none;
  no_memory.RequestBase([&](std::optional<DeltaPlan> p) {
    EXPECT_FALSE(p.has_value());
    none.Notify();
  });
  ASSERT_TRUE(none.WaitForNotificationWithTimeout(absl::Seconds(30)));
  PullWriter weights(&ps, nullptr, 0, WireDtype::kFloat32, true);
  const std::vector<PullPart> plain = Drain(&weights);
  EXPECT_EQ(Weights(plain), now);
  EXPECT_FALSE(plain.back().exact);
}

// A pruned store logs its updates too. A worker that replays the mask gets
// the base weights with it (each weight chunk followed by its PRUNE_MASK
// chunk), then updates only; one that does not gets plain weights.
TEST(PullWriterTest, APrunedModelsBaseCarriesItsMask) {
  ParamStoreOptions o = SmallStore();
  auto keep = std::make_shared<std::vector<uint8_t>>(350, 1);
  std::vector<float> initial = Initial();
  for (int64_t i = 0; i < 350; i += 3) {  // a third of the weights, from 0
    (*keep)[i] = 0;
    initial[i] = 0.0f;
  }
  o.keep = keep;
  auto store = ParamStore::Create(o, initial);
  ASSERT_TRUE(store.ok()) << store.status();
  ParamStore& ps = **store;
  ASSERT_NE(ps.update_log(), nullptr);
  std::string bytes;
  PushCompressed(&ps, TopK(ps.range().size(), &bytes));
  const std::vector<float> now = ps.Snapshot();

  DeltaPulls delta(&ps, int64_t{1} << 20);
  DeltaPlan plan;
  EXPECT_EQ(delta.Plan(/*has_copy=*/true, /*held=*/0, delta.lineage(),
                       /*replays_mask=*/false, &plan),
            DeltaPulls::Answer::kWeights);
  ASSERT_EQ(delta.Plan(true, 0, delta.lineage(), /*replays_mask=*/true, &plan),
            DeltaPulls::Answer::kPlan);  // updates only, as for a dense model
  EXPECT_EQ(plan.base, nullptr);
  EXPECT_EQ(plan.updates.size(), 1u);

  std::optional<DeltaPlan> based = BasePlan(&delta);
  ASSERT_TRUE(based.has_value());
  ASSERT_NE(based->base, nullptr);
  PullWriter exact(&ps, nullptr, std::move(*based), delta.lineage());
  const std::vector<PullPart> parts = Drain(&exact);
  ASSERT_EQ(parts.size(), 6u * 2 + 1);  // 6 weight chunks, 6 masks, the end
  std::vector<PullPart> weights;
  std::vector<uint8_t> sent_keep;
  for (size_t i = 0; i + 1 < parts.size(); i += 2) {
    const PullPart& w = parts[i];
    const PullPart& m = parts[i + 1];
    ASSERT_EQ(w.dtype_value, static_cast<int>(WireDtype::kFloat32));
    ASSERT_EQ(m.kind, PullPart::Kind::kExactChunk);
    ASSERT_EQ(m.dtype_value, kPruneMaskWireDtype);
    EXPECT_EQ(m.tensor, w.tensor);
    EXPECT_EQ(m.offset, w.offset);
    const int64_t n = w.data_bytes / 4;
    EXPECT_EQ(m.data_bytes, (n + 7) / 8);
    std::vector<uint8_t> flags(n);
    EXPECT_TRUE(UnpackPruneMask(Data(m), n, flags.data()));
    sent_keep.insert(sent_keep.end(), flags.begin(), flags.end());
    weights.push_back(w);
  }
  weights.push_back(parts.back());
  EXPECT_EQ(Weights(weights), now);
  EXPECT_EQ(sent_keep, *keep);
  EXPECT_EQ(parts.back().num_chunks, 12u);
  EXPECT_TRUE(parts.back().exact);
}

TEST(PullWriterTest, AnAdmmSlotPullServesTheSlotNotTheWeights) {
  ParamStoreOptions o = SmallStore();
  o.admm_slots = 2;
  auto store = ParamStore::Create(o, Initial());
  ASSERT_TRUE(store.ok()) << store.status();
  PushRequest point;
  point.kind = PushRequest::Kind::kAdmm;
  point.admm_slot = 1;
  point.values = std::make_shared<const std::vector<float>>(350, 4.0f);
  ASSERT_TRUE(SubmitAndWait(**store, std::move(point)).applied);
  ASSERT_TRUE(CheckSlotPull(**store, 1, /*delta=*/false).ok());
  PullWriter slot1(store->get(), nullptr, 0, WireDtype::kFloat32, true, 1);
  EXPECT_EQ(Weights(Drain(&slot1)), std::vector<float>(350, 4.0f));
  PullWriter slot0(store->get(), nullptr, 0, WireDtype::kFloat32, true, 0);
  EXPECT_EQ(Weights(Drain(&slot0)), Initial());
  PullWriter weights(store->get(), nullptr, 0, WireDtype::kFloat32, true);
  EXPECT_EQ(Weights(Drain(&weights)), (*store)->Snapshot());
  EXPECT_NE((*store)->Snapshot(), Initial());
  // A slot the store does not keep, or a slot as a delta pull: refused.
  EXPECT_EQ(CheckSlotPull(**store, 2, false).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckSlotPull(**store, 0, /*delta=*/true).code(),
            absl::StatusCode::kInvalidArgument);
  auto plain = ParamStore::Create(SmallStore(), Initial());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(CheckSlotPull(**plain, 0, false).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
