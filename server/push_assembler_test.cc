// PushAssembler without gRPC: every validation case returns the same
// INVALID_ARGUMENT message and reason as over the wire (grpc_service_test),
// releases the staging buffer, and a valid push yields exactly the values
// sent.
#include "server/push_assembler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/chunking.h"
#include "common/refusal.h"
#include "model/model_spec.h"
#include "gtest/gtest.h"
#include "proto/asgd.pb.h"
#include "compression/grad_codec.h"
#include "server/param_store.h"
#include "server/push_test_cases.h"
#include "step/compressed_apply.h"

namespace asgd {
namespace {

using asgd::v1::PushChunk;

class PushAssemblerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ModelSpec spec = PushTestSpec();
    ParamStoreOptions o;
    o.tensors = ModelTensors(spec);
    o.num_servers = 2;
    o.server_index = 0;
    o.num_shards = 2;
    o.max_chunk_elements = 64;  // many chunks per push
    auto store = ParamStore::Create(o, InitialParams(spec, 1));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    plan_ = PlanChunks(store_->layout(), store_->range(), 64);
    ASSERT_GE(plan_.size(), 4u);
  }

  // A valid push whose element i (server-local) is `base + i`.
  std::vector<PushChunk> ValidPush(float base, uint64_t version) {
    std::vector<PushChunk> msgs;
    PushChunk header;
    header.set_model_version(version);
    header.mutable_header()->set_worker_id(7);
    header.mutable_header()->set_model_version(version);
    header.mutable_header()->set_num_minibatches(3);
    msgs.push_back(header);
    for (const ChunkRef& c : plan_) {
      PushChunk m;
      m.set_model_version(version);
      m.mutable_chunk()->set_tensor(store_->layout().tensors()[c.tensor].name);
      m.mutable_chunk()->set_offset(c.offset);
      std::vector<float> values(c.count);
      for (int64_t i = 0; i < c.count; ++i) {
        values[i] =
            base + static_cast<float>(c.flat_begin - store_->range().begin + i);
      }
      AppendFloats(values.data(), c.count, m.mutable_chunk()->mutable_data());
      msgs.push_back(m);
    }
    PushChunk commit;
    commit.set_model_version(version);
    commit.mutable_commit()->set_num_chunks(plan_.size());
    msgs.push_back(commit);
    return msgs;
  }

  // Feeds `msgs` until the first error; returns it (OK if none).
  absl::Status Feed(PushAssembler& a, const std::vector<PushChunk>& msgs) {
    for (const PushChunk& m : msgs) {
      absl::Status s = a.Add(m);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  std::unique_ptr<ParamStore> store_;
  std::vector<ChunkRef> plan_;
};

TEST_F(PushAssemblerTest, ValidPushYieldsTheValuesSent) {
  PushAssembler a(store_.get());
  std::vector<PushChunk> msgs = ValidPush(0.5f, 0);
  int64_t bytes = 0;
  for (size_t i = 0; i < msgs.size(); ++i) {
    EXPECT_FALSE(a.committed()) << i;
    ASSERT_TRUE(a.Add(msgs[i]).ok()) << i;
    bytes += msgs[i].chunk().data().size();
  }
  EXPECT_TRUE(a.committed());
  EXPECT_FALSE(a.rejected());
  EXPECT_EQ(a.chunk_bytes(), bytes);
  EXPECT_EQ(a.chunks_received(), static_cast<int64_t>(plan_.size()));
  EXPECT_TRUE(a.EndOfStream().ok());  // after the commit: nothing to reject
  PushRequest r = a.TakeRequest();
  EXPECT_FALSE(a.holds_staging());
  EXPECT_EQ(r.worker_id, 7u);
  EXPECT_EQ(r.base_version, 0u);
  EXPECT_EQ(r.num_minibatches, 3);
  EXPECT_EQ(r.kind, PushRequest::Kind::kGradient);
  ASSERT_NE(r.values, nullptr);
  ASSERT_EQ(static_cast<int64_t>(r.values->size()), store_->range().size());
  for (size_t i = 0; i < r.values->size(); ++i) {
    ASSERT_EQ((*r.values)[i], 0.5f + static_cast<float>(i)) << i;
  }
  // The decode pass also measured the largest magnitude.
  EXPECT_EQ(r.max_abs, 0.5f + static_cast<float>(r.values->size() - 1));
  // The request is complete: the store accepts it.
  bool done = false;
  ASSERT_TRUE(
      store_->Submit(std::move(r), [&](const PushResult&) { done = true; })
          .ok());
  store_->Shutdown();  // applies what is queued
  EXPECT_TRUE(done);
  EXPECT_EQ(store_->version(), 1u);
}

TEST_F(PushAssemblerTest, AssignKindIsPassedOn) {
  PushAssembler a(store_.get());
  std::vector<PushChunk> msgs = ValidPush(1.0f, 0);
  msgs[0].mutable_header()->set_kind(asgd::v1::PushHeader::ASSIGN);
  ASSERT_TRUE(Feed(a, msgs).ok());
  EXPECT_EQ(a.TakeRequest().kind, PushRequest::Kind::kAssign);
}

TEST_F(PushAssemblerTest, AddKindIsPassedOn) {
  PushAssembler a(store_.get());
  std::vector<PushChunk> msgs = ValidPush(1.0f, 0);
  msgs[0].mutable_header()->set_kind(asgd::v1::PushHeader::ADD);
  ASSERT_TRUE(Feed(a, msgs).ok());
  EXPECT_EQ(a.TakeRequest().kind, PushRequest::Kind::kAdd);
}

TEST_F(PushAssemblerTest, RequestCanBeTakenOnce) {
  PushAssembler a(store_.get());
  ASSERT_TRUE(Feed(a, ValidPush(1.0f, 0)).ok());
  EXPECT_NE(a.TakeRequest().values, nullptr);
  EXPECT_EQ(a.TakeRequest().values, nullptr);
}

TEST_F(PushAssemblerTest, NoRequestBeforeTheCommit) {
  PushAssembler a(store_.get());
  std::vector<PushChunk> msgs = ValidPush(1.0f, 0);
  msgs.pop_back();
  ASSERT_TRUE(Feed(a, msgs).ok());
  EXPECT_EQ(a.TakeRequest().values, nullptr);
}

TEST_F(PushAssemblerTest, StreamEndingBeforeTheCommitIsIncomplete) {
  PushAssembler a(store_.get());
  std::vector<PushChunk> msgs = ValidPush(1.0f, 0);
  msgs.resize(msgs.size() / 2);
  ASSERT_TRUE(Feed(a, msgs).ok());
  absl::Status s = a.EndOfStream();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "push stream ended before its commit; nothing was applied");
  EXPECT_TRUE(a.rejected());
  EXPECT_EQ(a.reject_reason(), RejectReason::kIncomplete);
  EXPECT_FALSE(a.holds_staging());
  EXPECT_FALSE(a.committed());
}

TEST_F(PushAssemblerTest, EmptyStreamIsIncomplete) {
  PushAssembler a(store_.get());
  EXPECT_EQ(a.EndOfStream().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.reject_reason(), RejectReason::kIncomplete);
}

TEST_F(PushAssemblerTest, MessagesAfterTheCommitChangeNothing) {
  PushAssembler a(store_.get());
  std::vector<PushChunk> msgs = ValidPush(1.0f, 0);
  ASSERT_TRUE(Feed(a, msgs).ok());
  absl::Status s = a.Add(msgs[1]);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "push message after its commit");
  EXPECT_TRUE(a.committed());
  EXPECT_FALSE(a.rejected());
  EXPECT_NE(a.TakeRequest().values, nullptr);
}

TEST_F(PushAssemblerTest, FirstErrorIsFinal) {
  PushAssembler a(store_.get());
  std::vector<PushChunk> msgs = ValidPush(1.0f, 0);
  msgs[2].mutable_chunk()->set_tensor("nope");
  EXPECT_FALSE(Feed(a, msgs).ok());
  EXPECT_EQ(a.reject_reason(), RejectReason::kUnknownTensor);
  // A perfectly valid continuation is still refused, and the reason stays.
  for (const PushChunk& m : ValidPush(1.0f, 0)) {
    absl::Status s = a.Add(m);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "push message after the push was rejected");
  }
  EXPECT_EQ(a.reject_reason(), RejectReason::kUnknownTensor);
  EXPECT_FALSE(a.committed());
  EXPECT_TRUE(a.EndOfStream().ok());  // already rejected, not counted twice
  EXPECT_EQ(a.reject_reason(), RejectReason::kUnknownTensor);
  EXPECT_EQ(a.TakeRequest().values, nullptr);
}

TEST_F(PushAssemblerTest, EveryInvalidPushIsRejectedWithItsReason) {
  const std::vector<BadPushCase> cases = MalformedPushCases();
  for (const BadPushCase& c : cases) {
    std::vector<PushChunk> msgs = ValidPush(0.25f, 0);
    c.corrupt(msgs);
    PushAssembler a(store_.get());
    absl::Status s = Feed(a, msgs);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << s;
    EXPECT_NE(s.message().find(c.message), absl::string_view::npos)
        << c.name << ": " << s;
    EXPECT_TRUE(a.rejected()) << c.name;
    EXPECT_EQ(a.reject_reason(), c.reason) << c.name;
    EXPECT_FALSE(a.holds_staging()) << c.name;
    EXPECT_FALSE(a.committed()) << c.name;
  }
  // The assembler never touched the store.
  EXPECT_EQ(store_->version(), 0u);
  for (uint64_t n : store_->stats().rejected) EXPECT_EQ(n, 0u);
}

TEST_F(PushAssemblerTest, StagingMemoryIsTakenOnlyWhenDataArrives) {
  // A header, or nothing at all, holds no model-sized buffer.
  std::vector<std::unique_ptr<PushAssembler>> idle;
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<PushAssembler>(store_.get()));
    ASSERT_TRUE(idle.back()->Add(ValidPush(1.0f, 0)[0]).ok());
    EXPECT_FALSE(idle.back()->holds_staging());
  }
  EXPECT_EQ(store_->stats().staging_buffers, 0);
  PushAssembler a(store_.get());
  std::vector<PushChunk> msgs = ValidPush(1.0f, 0);
  ASSERT_TRUE(a.Add(msgs[0]).ok());
  ASSERT_TRUE(a.Add(msgs[1]).ok());
  EXPECT_TRUE(a.holds_staging());
  EXPECT_EQ(store_->stats().staging_buffers, 1);
}

TEST_F(PushAssemblerTest, PushesBeyondTheMemoryBudgetAreRefusedAsBusy) {
  ParamStoreOptions o = store_->options();
  o.push_memory_bytes = 2 * store_->range().size() * sizeof(float);  // 2 pushes
  auto store = ParamStore::Create(o, InitialParams(PushTestSpec(), 1));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::vector<PushChunk> msgs = ValidPush(1.0f, 0);
  ASSERT_GE(msgs.size(), 4u);  // header, chunks, commit
  // Every message of the push but its commit.
  auto send = [&](PushAssembler& a) {
    absl::Status s;
    for (size_t i = 0; i + 1 < msgs.size() && s.ok(); ++i) s = a.Add(msgs[i]);
    return s;
  };
  auto first = std::make_unique<PushAssembler>(store->get());
  PushAssembler second(store->get()), third(store->get());
  ASSERT_TRUE(send(*first).ok());
  ASSERT_TRUE(send(second).ok());
  EXPECT_EQ((*store)->stats().staging_bytes,
            (*store)->stats().staging_bytes_max);
  const absl::Status s = send(third);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(RefusalOf(s), Refusal::kPushMemory);
  EXPECT_EQ(third.reject_reason(), RejectReason::kPushMemory);
  EXPECT_FALSE(third.holds_staging());
  // Memory comes back when a push ends, whatever way.
  first.reset();
  PushAssembler fourth(store->get());
  EXPECT_TRUE(send(fourth).ok());
  // A push larger than the whole budget cannot even be configured.
  o.push_memory_bytes = store_->range().size() * sizeof(float) - 1;
  EXPECT_EQ(ParamStore::Create(o, InitialParams(PushTestSpec(), 1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PushAssemblerTest, PushesThatSentLittleDoNotTakeTheBudgetFromOthers) {
  // Room for one push; 64 pushes that sent their first chunk and stalled
  // hold only those chunks' bytes, and a whole push from elsewhere fits.
  ParamStoreOptions o = store_->options();
  const std::vector<PushChunk> msgs = ValidPush(1.0f, 0);
  const int64_t push_bytes = store_->range().size() * sizeof(float);
  const int64_t first_chunk_bytes = msgs[1].chunk().data().size();
  o.push_memory_bytes = push_bytes + 64 * first_chunk_bytes;
  auto store = ParamStore::Create(o, InitialParams(PushTestSpec(), 1));
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<std::unique_ptr<PushAssembler>> stalled;
  for (int i = 0; i < 64; ++i) {
    stalled.push_back(std::make_unique<PushAssembler>(store->get()));
    ASSERT_TRUE(stalled.back()->Add(msgs[0]).ok());
    ASSERT_TRUE(stalled.back()->Add(msgs[1]).ok()) << i;
  }
  EXPECT_EQ((*store)->stats().staging_bytes, 64 * first_chunk_bytes);
  PushAssembler honest(store->get());
  for (const PushChunk& m : msgs) ASSERT_TRUE(honest.Add(m).ok());
  EXPECT_TRUE(honest.committed());
  // The next one would pass the budget: refused at the chunk that does.
  PushAssembler one_more(store->get());
  EXPECT_TRUE(one_more.Add(msgs[0]).ok());
  EXPECT_EQ(RefusalOf(one_more.Add(msgs[1])), Refusal::kPushMemory);
  stalled.clear();
  EXPECT_EQ((*store)->stats().staging_bytes, push_bytes);
}

// A compressed push yields a CompressedGradient that decodes to exactly
// what was encoded, its largest |value| known, held in one staging buffer
// of the push budget like a float push.
TEST_F(PushAssemblerTest, CompressedPushYieldsTheEncodedGradient) {
  for (PushEncoding encoding : {PushEncoding::kOneBit, PushEncoding::kTopK}) {
    std::vector<float> decoded;
    const std::vector<PushChunk> msgs =
        CompressedPushMessages(store_->layout(), store_->range(), 50,
                               encoding, 0.5f, 0, &decoded);
    ASSERT_GE(msgs.size(), 5u);
    PushAssembler a(store_.get());
    ASSERT_TRUE(Feed(a, msgs).ok());
    ASSERT_TRUE(a.committed());
    EXPECT_EQ(a.encoding(), encoding);
    EXPECT_TRUE(a.holds_staging());
    EXPECT_EQ(store_->stats().staging_buffers, 1);
    PushRequest r = a.TakeRequest();
    ASSERT_NE(r.compressed, nullptr);
    EXPECT_EQ(r.values, nullptr);
    EXPECT_EQ(r.compressed->size(), store_->range().size());
    std::vector<float> got(r.compressed->size());
    DecodeCompressedRange(r.compressed->chunks, got.data());
    EXPECT_EQ(got, decoded);
    float max_abs = 0;
    for (float x : decoded) max_abs = std::max(max_abs, std::fabs(x));
    EXPECT_EQ(r.max_abs, max_abs);
    EXPECT_EQ(r.compressed->max_abs, max_abs);
  }
}

TEST_F(PushAssemblerTest, MalformedCompressedPushesAreRejectedWhole) {
  for (const BadPushCase& c : MalformedCompressedPushCases()) {
    std::vector<PushChunk> msgs = CompressedPushMessages(
        store_->layout(), store_->range(), 64, PushEncoding::kOneBit, 0.5f, 0);
    ASSERT_GE(msgs.size(), 5u);
    c.corrupt(msgs);
    PushAssembler a(store_.get());
    absl::Status s = Feed(a, msgs);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << s;
    EXPECT_NE(s.message().find(c.message), absl::string_view::npos)
        << c.name << ": " << s;
    EXPECT_EQ(a.reject_reason(), c.reason) << c.name;
    EXPECT_FALSE(a.holds_staging()) << c.name;
    EXPECT_FALSE(a.committed()) << c.name;
  }
}

// What only limits can refuse: a store that takes no compressed pushes, a
// compressed chunk longer than the store's limit, and a "compressed" push
// larger than its float32 form (1-bit with one-element groups: 8 bytes per
// element), which the staging buffer could not hold.
TEST_F(PushAssemblerTest, CompressedPushesBeyondTheLimitsAreRefused) {
  const std::vector<PushChunk> msgs = CompressedPushMessages(
      store_->layout(), store_->range(), 64, PushEncoding::kOneBit, 0.5f, 0);
  ParamStoreOptions o = store_->options();
  o.compressed_pushes = false;
  auto no_compression = ParamStore::Create(o, InitialParams(PushTestSpec(), 1));
  ASSERT_TRUE(no_compression.ok());
  {
    PushAssembler a(no_compression->get());
    const absl::Status s = Feed(a, msgs);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("does not accept compressed pushes"),
              absl::string_view::npos)
        << s;
    EXPECT_EQ(a.reject_reason(), RejectReason::kBadEncoding);
  }
  o = store_->options();
  o.max_compressed_chunk_elements = 63;
  auto small = ParamStore::Create(o, InitialParams(PushTestSpec(), 1));
  ASSERT_TRUE(small.ok());
  {
    PushAssembler a(small->get());
    const absl::Status s = Feed(a, msgs);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(a.reject_reason(), RejectReason::kBadEncoding) << s;
  }
  // One-element groups.
  std::vector<PushChunk> fat = msgs;
  const std::vector<ChunkRef> plan =
      PlanChunks(store_->layout(), store_->range(), 64);
  for (size_t i = 0; i < plan.size(); ++i) {
    std::vector<float> g(plan[i].count, 1.0f), r(plan[i].count, 0.0f);
    std::string bytes;
    ASSERT_TRUE(EncodeOneBit(g, 1, 1, absl::MakeSpan(r), &bytes).ok());
    fat[1 + i].mutable_chunk()->set_data(bytes);
  }
  PushAssembler a(store_.get());
  const absl::Status s = Feed(a, fat);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the size of its float32 form"),
            absl::string_view::npos)
      << s;
  EXPECT_EQ(a.reject_reason(), RejectReason::kBadSize);
  EXPECT_FALSE(a.holds_staging());
}

}  // namespace
}  // namespace asgd
