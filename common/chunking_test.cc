#include "common/chunking.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

class ChunkingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto layout = ModelLayout::Create(
        {{"a/weight", {7, 13}}, {"a/bias", {7}}, {"b/weight", {5, 7}}}, 2, 2);
    ASSERT_TRUE(layout.ok());
    layout_ = std::make_unique<ModelLayout>(*std::move(layout));
    model_.resize(layout_->total_size());
    std::iota(model_.begin(), model_.end(), 0.5f);
  }

  std::string Bytes(int64_t flat_begin, int64_t count) {
    std::string s;
    AppendFloats(model_.data() + flat_begin, count, &s);
    return s;
  }

  std::unique_ptr<ModelLayout> layout_;
  std::vector<float> model_;
};

TEST_F(ChunkingTest, RoundTripEveryServerAndChunkSize) {
  for (int64_t max : {1, 3, 16, 1000}) {
    for (int server = 0; server < 2; ++server) {
      FlatRange range = layout_->ServerRange(server);
      std::vector<float> out(range.size(), -1.0f);
      ChunkAssembler assembler(layout_.get(), range, max, out.data(), true);
      auto plan = PlanChunks(*layout_, range, max);
      for (const ChunkRef& c : plan) {
        EXPECT_LE(c.count, max);
        ASSERT_TRUE(assembler
                        .Add(layout_->tensors()[c.tensor].name, c.offset,
                             Bytes(c.flat_begin, c.count))
                        .ok());
      }
      ASSERT_TRUE(assembler.Finish(plan.size()).ok());
      for (int64_t i = 0; i < range.size(); ++i) {
        ASSERT_EQ(out[i], model_[range.begin + i]) << "max=" << max;
      }
    }
  }
}

TEST_F(ChunkingTest, RejectsEachKindOfBadSequence) {
  FlatRange range = layout_->ServerRange(0);
  auto plan = PlanChunks(*layout_, range, 8);
  ASSERT_GE(plan.size(), 3u);
  const ChunkRef c0 = plan[0];
  const std::string name0 = layout_->tensors()[c0.tensor].name;
  std::vector<float> out(range.size());

  struct Case {
    std::string what;
    std::string tensor;
    int64_t offset;
    std::string data;
    ChunkError error;
  };
  std::string nan_bytes = Bytes(c0.flat_begin, c0.count);
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&nan_bytes[4], &nan, 4);
  std::string inf_bytes = Bytes(c0.flat_begin, c0.count);
  float inf = std::numeric_limits<float>::infinity();
  std::memcpy(&inf_bytes[0], &inf, 4);
  std::vector<Case> cases = {
      {"unknown", "nope", 0, Bytes(0, 4), ChunkError::kUnknownTensor},
      {"not here", "b/weight", 0, Bytes(0, 4), ChunkError::kUnknownTensor},
      {"odd bytes", name0, c0.offset, "abc", ChunkError::kBadSize},
      {"empty", name0, c0.offset, "", ChunkError::kBadSize},
      {"too long", name0, c0.offset, Bytes(c0.flat_begin, 9),
       ChunkError::kBadSize},
      {"skips ahead", name0, c0.offset + 1, Bytes(c0.flat_begin, 4),
       ChunkError::kBadSequence},
      {"nan", name0, c0.offset, nan_bytes, ChunkError::kNonFinite},
      {"inf", name0, c0.offset, inf_bytes, ChunkError::kNonFinite},
  };
  for (const Case& c : cases) {
    ChunkAssembler assembler(layout_.get(), range, 8, out.data(), true);
    absl::Status status = assembler.Add(c.tensor, c.offset, c.data);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_EQ(assembler.error(), c.error) << c.what << ": " << status;
    EXPECT_FALSE(status.message().empty());
    // Once failed, stays failed.
    EXPECT_FALSE(assembler.Finish(0).ok());
  }
}

TEST_F(ChunkingTest, RejectsDuplicateMissingAndMiscountedChunks) {
  FlatRange range = layout_->ServerRange(1);
  auto plan = PlanChunks(*layout_, range, 8);
  ASSERT_GE(plan.size(), 2u);
  std::vector<float> out(range.size());
  auto add = [&](ChunkAssembler& a, const ChunkRef& c) {
    return a.Add(layout_->tensors()[c.tensor].name, c.offset,
                 Bytes(c.flat_begin, c.count));
  };
  {  // duplicate (overlap)
    ChunkAssembler a(layout_.get(), range, 8, out.data(), true);
    ASSERT_TRUE(add(a, plan[0]).ok());
    EXPECT_EQ(add(a, plan[0]).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(a.error(), ChunkError::kBadSequence);
  }
  {  // missing last chunk
    ChunkAssembler a(layout_.get(), range, 8, out.data(), true);
    for (size_t i = 0; i + 1 < plan.size(); ++i) ASSERT_TRUE(add(a, plan[i]).ok());
    EXPECT_EQ(a.Finish(plan.size() - 1).code(),
              absl::StatusCode::kInvalidArgument);
  }
  {  // extra chunk after the end
    ChunkAssembler a(layout_.get(), range, 8, out.data(), true);
    for (const ChunkRef& c : plan) ASSERT_TRUE(add(a, c).ok());
    EXPECT_EQ(add(a, plan.back()).code(), absl::StatusCode::kInvalidArgument);
  }
  {  // wrong declared count
    ChunkAssembler a(layout_.get(), range, 8, out.data(), true);
    for (const ChunkRef& c : plan) ASSERT_TRUE(add(a, c).ok());
    EXPECT_EQ(a.Finish(plan.size() + 1).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// The data of a chunk split into pieces at every possible byte position,
// in both encodings: the result must equal the one-piece decode.
TEST_F(ChunkingTest, PiecesMaySplitElementsAnywhere) {
  const FlatRange range = layout_->ServerRange(1);
  const auto plan = PlanChunks(*layout_, range, 1000);
  for (WireDtype dtype : {WireDtype::kFloat32, WireDtype::kBfloat16}) {
    const ChunkRef& c = plan[0];
    std::string wire(c.count * WireBytes(dtype), '\0');
    EncodeFloats(model_.data() + c.flat_begin, c.count, dtype, wire.data());
    for (size_t cut1 = 0; cut1 <= wire.size(); ++cut1) {
      for (size_t cut2 : {cut1, cut1 + 1, cut1 + 3, wire.size()}) {
        if (cut2 > wire.size()) continue;
        const absl::string_view all(wire);
        const absl::string_view pieces[] = {all.substr(0, cut1),
                                            all.substr(cut1, cut2 - cut1),
                                            all.substr(cut2)};
        std::vector<float> out(range.size(), -1.0f);
        ChunkAssembler assembler(layout_.get(), range, 1000, out.data(), true);
        ASSERT_TRUE(assembler
                        .Add(layout_->tensors()[c.tensor].name, c.offset,
                             pieces, static_cast<int>(dtype))
                        .ok());
        for (int64_t i = 0; i < c.count; ++i) {
          const float want = model_[c.flat_begin + i];
          ASSERT_EQ(out[c.flat_begin - range.begin + i],
                    dtype == WireDtype::kFloat32
                        ? want
                        : Bf16ToFloat(FloatToBf16(want)))
              << "cuts " << cut1 << "," << cut2;
        }
      }
    }
  }
}

TEST_F(ChunkingTest, NonFiniteValueStraddlingPiecesIsFound) {
  const FlatRange range = layout_->ServerRange(0);
  const auto plan = PlanChunks(*layout_, range, 1000);
  const ChunkRef& c = plan[0];
  std::vector<float> values(model_.begin() + c.flat_begin,
                            model_.begin() + c.flat_begin + c.count);
  values[5] = std::numeric_limits<float>::infinity();
  for (WireDtype dtype : {WireDtype::kFloat32, WireDtype::kBfloat16}) {
    std::string wire(c.count * WireBytes(dtype), '\0');
    EncodeFloats(values.data(), c.count, dtype, wire.data());
    const absl::string_view all(wire);
    const size_t cut = 5 * WireBytes(dtype) + 1;  // inside element 5
    const absl::string_view pieces[] = {all.substr(0, cut), all.substr(cut)};
    std::vector<float> out(range.size());
    ChunkAssembler assembler(layout_.get(), range, 1000, out.data(), true);
    const absl::Status s = assembler.Add(layout_->tensors()[c.tensor].name,
                                         c.offset, pieces,
                                         static_cast<int>(dtype));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(assembler.error(), ChunkError::kNonFinite);
    EXPECT_NE(s.message().find("at element 5"), std::string::npos)
        << s.message();
  }
}

TEST_F(ChunkingTest, RejectsUnknownEncodingAndOddBf16Sizes) {
  const FlatRange range = layout_->ServerRange(0);
  const auto plan = PlanChunks(*layout_, range, 1000);
  const std::string name = layout_->tensors()[plan[0].tensor].name;
  std::vector<float> out(range.size());
  {
    ChunkAssembler assembler(layout_.get(), range, 1000, out.data(), true);
    const absl::Status s =
        assembler.Add(name, plan[0].offset, std::string(8, '\0'), 7);
    EXPECT_EQ(assembler.error(), ChunkError::kBadSize);
    EXPECT_NE(s.message().find("dtype 7"), std::string::npos) << s.message();
  }
  {
    ChunkAssembler assembler(layout_.get(), range, 1000, out.data(), true);
    const absl::Status s = assembler.Add(
        name, plan[0].offset, std::string(3, '\0'),
        static_cast<int>(WireDtype::kBfloat16));
    EXPECT_EQ(assembler.error(), ChunkError::kBadSize);
    EXPECT_NE(s.message().find("multiple of 2"), std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace asgd
