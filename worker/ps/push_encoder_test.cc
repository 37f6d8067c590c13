// PushEncoder without any transport: float pushes as views of the gradient,
// the error-feedback residual carried from push to push, handed back when a
// push is not applied and kept when it is, and assign pushes never
// compressed.
#include "worker/ps/push_encoder.h"

#include <cmath>
#include <limits>
#include <vector>

#include "compression/grad_codec.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

class PushEncoderTest : public ::testing::Test {
 protected:
  PushEncoderTest()
      : layout_(*ModelLayout::Create({{"w", {6, 8}}, {"b", {8}}}, 2, 1)) {}

  std::unique_ptr<PushEncoder> Encoder(std::optional<PushEncoding> encoding) {
    PushEncoderOptions o;
    o.push_encoding = encoding;
    o.top_k_fraction = 0.25;
    o.max_chunk_elements = 16;
    o.compressed_chunk_elements = 16;
    auto encoder = PushEncoder::Create(layout_, o);
    EXPECT_TRUE(encoder.ok()) << encoder.status();
    return *std::move(encoder);
  }

  std::vector<float> Gradient(float scale) const {
    std::vector<float> g(layout_.total_size());
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f);
    }
    return g;
  }

  // The values server `s`'s compressed push carries, over its range.
  std::vector<float> Decoded(int s, const ServerPush& push) const {
    const FlatRange range = layout_.ServerRange(s);
    std::vector<float> out(range.size(), 0.0f);
    for (const EncodedChunk& c : push.chunks) {
      EXPECT_TRUE(DecodeCompressedChunk(
                      c.bytes, CodecLimits{},
                      absl::MakeSpan(out).subspan(c.ref.flat_begin - range.begin,
                                                  c.ref.count))
                      .ok());
    }
    return out;
  }

  ModelLayout layout_;
};

TEST_F(PushEncoderTest, FloatPushesAreViewsOfTheGradientTilingEachRange) {
  auto encoder = Encoder(PushEncoding::kBfloat16);
  const std::vector<float> g = Gradient(1.0f);
  for (int s = 0; s < 2; ++s) {
    auto push = encoder->Encode(s, g, PushKind::kGradient);
    ASSERT_TRUE(push.ok()) << push.status();
    EXPECT_EQ(push->encoding, PushEncoding::kBfloat16);
    int64_t next = layout_.ServerRange(s).begin;
    for (const EncodedChunk& c : push->chunks) {
      EXPECT_EQ(c.ref.flat_begin, next);
      EXPECT_LE(c.ref.count, 16);
      EXPECT_EQ(c.values.data(), g.data() + c.ref.flat_begin);
      EXPECT_TRUE(c.bytes.empty());
      next += c.ref.count;
    }
    EXPECT_EQ(next, layout_.ServerRange(s).end);
    EXPECT_TRUE(encoder->Residual(s).empty());
  }
}

TEST_F(PushEncoderTest, TheTopKPlanHasEncodesChunksAndSplitsBackIntoThem) {
  auto encoder = Encoder(PushEncoding::kTopK);
  const TopKPlan& plan = encoder->top_k_plan();
  EXPECT_TRUE(encoder->one_bit_plan().chunks.empty());
  EXPECT_TRUE(plan.Validate(layout_.total_size()).ok());
  // The whole model encoded by the plan is, split, what Encode sends.
  const std::vector<float> g = Gradient(1.0f);
  std::vector<float> residual(g.size(), 0.0f);
  std::vector<std::string> chunks;
  ASSERT_TRUE(
      EncodeTopKPlan(plan, g, 1.0f, absl::MakeSpan(residual), &chunks).ok());
  auto parts = encoder->SplitTopK(chunks);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  size_t planned = 0;
  for (int s = 0; s < 2; ++s) {
    auto want = encoder->Encode(s, g, PushKind::kGradient);
    ASSERT_TRUE(want.ok()) << want.status();
    const ServerPush& got = (*parts)[s];
    EXPECT_EQ(got.encoding, PushEncoding::kTopK);
    ASSERT_EQ(got.chunks.size(), want->chunks.size());
    for (size_t c = 0; c < got.chunks.size(); ++c, ++planned) {
      EXPECT_EQ(got.chunks[c].ref.flat_begin, want->chunks[c].ref.flat_begin);
      EXPECT_EQ(plan.chunks[planned].k,
                TopKCount(0.25, got.chunks[c].ref.count));
      EXPECT_EQ(got.chunks[c].bytes, want->chunks[c].bytes);
    }
  }
  EXPECT_EQ(planned, plan.chunks.size());
  chunks.pop_back();
  EXPECT_EQ(encoder->SplitTopK(chunks).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Encoder(PushEncoding::kOneBit)->SplitTopK({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Encoder(PushEncoding::kOneBit)->top_k_plan().chunks.empty());
}

TEST_F(PushEncoderTest, AnAppliedPushKeepsWhatItLostAndTheNextCarriesIt) {
  for (PushEncoding e : {PushEncoding::kOneBit, PushEncoding::kTopK}) {
    auto encoder = Encoder(e);
    const std::vector<float> g = Gradient(0.5f);
    for (int s = 0; s < 2; ++s) {
      const FlatRange range = layout_.ServerRange(s);
      auto push = encoder->Encode(s, g, PushKind::kGradient);
      ASSERT_TRUE(push.ok()) << push.status();
      EXPECT_EQ(push->encoding, e);
      const std::vector<float> d = Decoded(s, *push);
      encoder->Settle(s, *push, /*applied=*/true);
      std::vector<float> r = encoder->Residual(s);
      ASSERT_EQ(static_cast<int64_t>(r.size()), range.size());
      bool lost = false;
      for (int64_t i = 0; i < range.size(); ++i) {
        EXPECT_FLOAT_EQ(r[i], g[range.begin + i] - d[i]) << i;
        lost |= r[i] != 0.0f;
      }
      EXPECT_TRUE(lost);
      // A zero gradient next: the push carries the residual.
      const std::vector<float> zero(g.size(), 0.0f);
      auto next = encoder->Encode(s, zero, PushKind::kGradient);
      ASSERT_TRUE(next.ok());
      const std::vector<float> d2 = Decoded(s, *next);
      double carried = 0;
      for (float v : d2) carried += std::fabs(v);
      EXPECT_GT(carried, 0.0);
      encoder->Settle(s, *next, /*applied=*/true);
      const std::vector<float> r2 = encoder->Residual(s);
      for (int64_t i = 0; i < range.size(); ++i) {
        EXPECT_FLOAT_EQ(r2[i], r[i] - d2[i]) << i;
      }
    }
  }
}

TEST_F(PushEncoderTest, APushNotAppliedGoesBackIntoTheResidual) {
  auto encoder = Encoder(PushEncoding::kOneBit);
  const std::vector<float> g = Gradient(0.5f);
  const FlatRange range = layout_.ServerRange(1);
  auto push = encoder->Encode(1, g, PushKind::kGradient);
  ASSERT_TRUE(push.ok());
  encoder->Settle(1, *push, /*applied=*/false);
  const std::vector<float> r = encoder->Residual(1);
  for (int64_t i = 0; i < range.size(); ++i) {
    EXPECT_NEAR(r[i], g[range.begin + i], 1e-6) << i;
  }
  // Server 0's residual is its own.
  for (float v : encoder->Residual(0)) EXPECT_EQ(v, 0.0f);
}

TEST_F(PushEncoderTest, AssignAndAddPushesAreNeverCompressed) {
  for (PushKind kind : {PushKind::kAssign, PushKind::kAdd}) {
    auto encoder = Encoder(PushEncoding::kOneBit);
    const std::vector<float> w = Gradient(2.0f);
    auto push = encoder->Encode(0, w, kind);
    ASSERT_TRUE(push.ok());
    EXPECT_EQ(push->kind, kind);
    EXPECT_EQ(push->encoding, PushEncoding::kFloat32);
    EXPECT_FALSE(push->compressed());
    for (const EncodedChunk& c : push->chunks) {
      EXPECT_EQ(c.values.data(), w.data() + c.ref.flat_begin);
      EXPECT_TRUE(c.bytes.empty());
    }
    encoder->Settle(0, *push, /*applied=*/false);
    for (float v : encoder->Residual(0)) EXPECT_EQ(v, 0.0f);
  }
}

TEST_F(PushEncoderTest, NonFiniteGradientIsRefusedAndEarlierChunksGoBack) {
  auto encoder = Encoder(PushEncoding::kOneBit);
  std::vector<float> g = Gradient(0.5f);
  const int s = layout_.ServerRange(0).size() > layout_.ServerRange(1).size()
                    ? 0
                    : 1;
  const FlatRange range = layout_.ServerRange(s);
  ASSERT_GT(range.size(), 16);
  // The chunks (the same plan as a float push's with equal limits).
  auto plan = Encoder(std::nullopt)->Encode(s, g, PushKind::kGradient);
  ASSERT_TRUE(plan.ok());
  ASSERT_GE(plan->chunks.size(), 2u);
  const ChunkRef bad = plan->chunks[1].ref;
  g[bad.flat_begin] = std::numeric_limits<float>::quiet_NaN();
  auto push = encoder->Encode(s, g, PushKind::kGradient);
  EXPECT_EQ(push.status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<float> r = encoder->Residual(s);
  // The first chunk went back whole; from the bad one on, nothing changed.
  for (int64_t i = range.begin; i < bad.flat_begin; ++i) {
    EXPECT_NEAR(r[i - range.begin], g[i], 1e-6) << i;
  }
  for (int64_t i = bad.flat_begin; i < range.end; ++i) {
    EXPECT_EQ(r[i - range.begin], 0.0f) << i;
  }
}

TEST_F(PushEncoderTest, ChunkLimitsBelowOneAreRefused) {
  PushEncoderOptions o;
  o.push_encoding = PushEncoding::kOneBit;
  o.max_chunk_elements = 16;
  EXPECT_EQ(PushEncoder::Create(layout_, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
