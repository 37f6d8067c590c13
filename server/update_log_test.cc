#include "server/update_log.h"

#include <memory>
#include <string>
#include <vector>

#include "compression/grad_codec.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

// A one-bit gradient of `n` elements in chunks of `chunk` elements, with
// its encoded bytes laid end to end as a push brings them.
struct Encoded {
  std::string bytes;
  CompressedGradient gradient;
};

std::unique_ptr<Encoded> OneBitGradient(int64_t n, int64_t chunk, float seed) {
  auto e = std::make_unique<Encoded>();
  std::vector<float> g(n), residual(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) g[i] = seed * ((i % 3) - 1.0f);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t count = std::min(chunk, n - begin);
    std::string out;
    const absl::Status s =
        EncodeOneBit(absl::MakeConstSpan(g).subspan(begin, count), 8,
                     std::min<int64_t>(8, count),
                     absl::MakeSpan(residual).subspan(begin, count), &out);
    EXPECT_TRUE(s.ok()) << s;
    e->bytes += out;
    e->gradient.encoded_sizes.push_back(static_cast<int64_t>(out.size()));
  }
  e->gradient.encoded = e->bytes;
  int64_t at = 0;
  for (int64_t size : e->gradient.encoded_sizes) {
    auto parsed = ParseCompressedChunk(absl::string_view(e->bytes).substr(at, size),
                                       CodecLimits{});
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    e->gradient.chunks.push_back(*parsed);
    at += size;
  }
  return e;
}

TEST(LoggedUpdateTest, KeepsChunksAndTheirPlaces) {
  auto e = OneBitGradient(100, 40, 0.5f);
  auto u = LoggedUpdate::Of(7, e->gradient, 0.25f, 0.01f);
  ASSERT_TRUE(u->replayable);
  EXPECT_EQ(u->version, 7u);
  EXPECT_EQ(u->learning_rate, 0.25f);
  EXPECT_EQ(u->weight_decay, 0.01f);
  EXPECT_EQ(u->encoding, PushEncoding::kOneBit);
  EXPECT_EQ(u->bytes, e->bytes);
  ASSERT_EQ(u->chunks.size(), 3u);
  EXPECT_EQ(u->chunks[1].offset, 40);
  EXPECT_EQ(u->chunks[2].count, 20);
  EXPECT_EQ(u->chunks[2].byte_begin + u->chunks[2].byte_size,
            static_cast<int64_t>(e->bytes.size()));
  // Each kept chunk parses back to its elements.
  for (const auto& c : u->chunks) {
    auto parsed = ParseCompressedChunk(
        absl::string_view(u->bytes).substr(c.byte_begin, c.byte_size),
        CodecLimits{});
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(parsed->count, c.count);
  }
}

TEST(LoggedUpdateTest, WithoutItsBytesItCannotBeReplayed) {
  auto e = OneBitGradient(10, 10, 1.0f);
  e->gradient.encoded_sizes.clear();
  EXPECT_FALSE(LoggedUpdate::Of(1, e->gradient, 0.1f, 0.0f)->replayable);
}

TEST(UpdateLogTest, CollectsConsecutiveReplayableUpdates) {
  UpdateLog log(1 << 20);
  auto e = OneBitGradient(64, 64, 1.0f);
  for (uint64_t v = 1; v <= 5; ++v) {
    log.Append(LoggedUpdate::Of(v, e->gradient, 0.1f, 0.0f));
  }
  auto all = log.Collect(0, 5, 1 << 20);
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 5u);
  for (uint64_t v = 1; v <= 5; ++v) EXPECT_EQ((*all)[v - 1]->version, v);
  auto some = log.Collect(2, 4, 1 << 20);
  ASSERT_TRUE(some.has_value());
  ASSERT_EQ(some->size(), 2u);
  EXPECT_EQ(some->front()->version, 3u);
  EXPECT_TRUE(log.Collect(5, 5, 0).has_value());  // nothing to send
  EXPECT_TRUE(log.Collect(5, 5, 0)->empty());
  EXPECT_FALSE(log.Collect(4, 6, 1 << 20).has_value());  // not logged yet
  EXPECT_FALSE(log.Collect(6, 5, 1 << 20).has_value());  // from the future
  // Over the byte budget of the caller.
  EXPECT_FALSE(log.Collect(0, 5, 4 * static_cast<int64_t>(e->bytes.size()))
                   .has_value());
  EXPECT_TRUE(log.Collect(1, 5, 4 * static_cast<int64_t>(e->bytes.size()))
                  .has_value());
  EXPECT_EQ(log.last_unreplayable(), 0u);
}

TEST(UpdateLogTest, AnUnreplayableUpdateBlocksDeltasAcrossIt) {
  UpdateLog log(1 << 20);
  auto e = OneBitGradient(64, 64, 1.0f);
  log.Append(LoggedUpdate::Of(1, e->gradient, 0.1f, 0.0f));
  log.Append(LoggedUpdate::Unreplayable(2));
  log.Append(LoggedUpdate::Of(3, e->gradient, 0.1f, 0.0f));
  EXPECT_FALSE(log.Collect(0, 3, 1 << 20).has_value());
  EXPECT_FALSE(log.Collect(1, 2, 1 << 20).has_value());
  EXPECT_TRUE(log.Collect(2, 3, 1 << 20).has_value());
  EXPECT_TRUE(log.Collect(0, 1, 1 << 20).has_value());
  EXPECT_EQ(log.last_unreplayable(), 2u);
}

TEST(UpdateLogTest, DropsTheOldestBeyondItsMemory) {
  auto e = OneBitGradient(256, 64, 1.0f);
  const int64_t each = static_cast<int64_t>(e->bytes.size());
  UpdateLog log(3 * each);
  for (uint64_t v = 1; v <= 10; ++v) {
    log.Append(LoggedUpdate::Of(v, e->gradient, 0.1f, 0.0f));
    EXPECT_LE(log.bytes(), 3 * each);
  }
  EXPECT_EQ(log.size(), 3u);
  EXPECT_FALSE(log.Collect(6, 10, 1 << 20).has_value());  // 7 was dropped
  EXPECT_TRUE(log.Collect(7, 10, 1 << 20).has_value());
}

TEST(UpdateLogTest, KeepsAtMostMaxEntriesOfEmptyUpdates) {
  UpdateLog log(1 << 20);
  for (uint64_t v = 1; v <= UpdateLog::kMaxEntries + 10; ++v) {
    log.Append(LoggedUpdate::Unreplayable(v));
  }
  EXPECT_EQ(log.size(), UpdateLog::kMaxEntries);
}

TEST(UpdateLogTest, AGapInVersionsStartsTheLogOver) {
  UpdateLog log(1 << 20);
  auto e = OneBitGradient(64, 64, 1.0f);
  log.Append(LoggedUpdate::Of(1, e->gradient, 0.1f, 0.0f));
  log.Append(LoggedUpdate::Of(2, e->gradient, 0.1f, 0.0f));
  log.Append(LoggedUpdate::Of(10, e->gradient, 0.1f, 0.0f));  // restored
  EXPECT_EQ(log.size(), 1u);
  EXPECT_FALSE(log.Collect(1, 10, 1 << 20).has_value());
  EXPECT_TRUE(log.Collect(9, 10, 1 << 20).has_value());
}

}  // namespace
}  // namespace asgd
