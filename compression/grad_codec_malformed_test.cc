// Every malformed compressed chunk is refused with InvalidArgument, a message
// naming what is wrong, and nothing written.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compression/grad_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

using ::testing::HasSubstr;
using namespace std::string_literals;

constexpr float kSentinel = 12345.0f;

std::vector<float> Ramp(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * i) * (1 + i % 7);
  return v;
}

std::string OneBit(int64_t n = 100, int64_t g = 16, int64_t f = 5) {
  std::vector<float> grad = Ramp(n), residual(n, 0.0f);
  std::string bytes;
  EXPECT_TRUE(EncodeOneBit(grad, g, f, absl::MakeSpan(residual), &bytes).ok());
  return bytes;
}

std::string TopK(int64_t n = 3000, int64_t k = 40) {
  std::vector<float> grad = Ramp(n), residual(n, 0.0f);
  std::string bytes;
  EXPECT_TRUE(EncodeTopK(grad, k, absl::MakeSpan(residual), &bytes).ok());
  return bytes;
}

void PutU32(std::string* s, size_t at, uint32_t v) {
  std::memcpy(&(*s)[at], &v, 4);
}
void PutF32(std::string* s, size_t at, float v) {
  std::memcpy(&(*s)[at], &v, 4);
}
uint32_t GetU32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, &s[at], 4);
  return v;
}

// Refused with InvalidArgument mentioning `what`, and the output untouched.
void ExpectRefused(const std::string& bytes, const std::string& what,
                   const CodecLimits& limits = {}) {
  absl::StatusOr<CompressedChunk> parsed = ParseCompressedChunk(bytes, limits);
  ASSERT_FALSE(parsed.ok()) << "accepted; expected: " << what;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(what));
  const int64_t count = bytes.size() >= 8 ? GetU32(bytes, 4) : 1;
  std::vector<float> out(
      std::min<int64_t>(std::max<int64_t>(count, 1), 1 << 20), kSentinel);
  const absl::Status s =
      DecodeCompressedChunk(bytes, limits, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  for (float x : out) ASSERT_EQ(x, kSentinel) << "wrote on error: " << what;
}

TEST(MalformedTest, ValidChunksParse) {
  for (const std::string& bytes : {OneBit(), TopK(), OneBit(8, 8, 8)}) {
    ASSERT_TRUE(ParseCompressedChunk(bytes, {}).ok());
  }
}

TEST(MalformedTest, EveryTruncationAndTrailingBytes) {
  for (const std::string& valid : {OneBit(), TopK()}) {
    for (size_t len = 0; len < valid.size(); ++len) {
      absl::StatusOr<CompressedChunk> parsed =
          ParseCompressedChunk(valid.substr(0, len), {});
      ASSERT_FALSE(parsed.ok()) << "prefix of " << len;
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    }
    ExpectRefused(valid.substr(0, 15), "shorter than the 16-byte header");
    ExpectRefused(valid + std::string(1, '\0'), "want exactly");
  }
}

TEST(MalformedTest, HeaderFields) {
  std::string b = OneBit();
  for (uint8_t enc : {0, 3, 255}) {
    std::string bad = b;
    bad[0] = static_cast<char>(enc);
    ExpectRefused(bad, "unknown encoding");
  }
  for (uint8_t version : {0, 2, 255}) {
    std::string bad = b;
    bad[1] = static_cast<char>(version);
    ExpectRefused(bad, "format version");
  }
  std::string flags = b;
  flags[3] = 1;
  ExpectRefused(flags, "flags 0x0100");
  std::string zero = b;
  PutU32(&zero, 4, 0);
  ExpectRefused(zero, "element count 0");
  CodecLimits small;
  small.max_elements = 99;
  ExpectRefused(b, "element count 100 out of range [1, 99]", small);
  std::string huge = b;
  PutU32(&huge, 4, 0xffffffffu);
  ExpectRefused(huge, "element count 4294967295");
}

TEST(MalformedTest, OneBitCountsThatDoNotAddUp) {
  const std::string b =
      OneBit(100, 16, 5);  // groups: 5, then 6 x 16 (the last 15)
  std::string bad = b;
  PutU32(&bad, 4, 120);  // more elements than the bits and groups hold
  ExpectRefused(bad, "want exactly");
  bad = b;
  PutU32(&bad, 8, 8);  // group size: another number of groups
  ExpectRefused(bad, "want exactly");
  bad = b;
  PutU32(&bad, 8, 0);
  ExpectRefused(bad, "group size 0 out of range");
  CodecLimits small;
  small.max_group_size = 15;
  ExpectRefused(b, "group size 16 out of range [1, 15]", small);
  bad = b;
  PutU32(&bad, 12, 0);
  ExpectRefused(bad, "first group of 0 elements");
  bad = b;
  PutU32(&bad, 12, 17);  // F > G
  ExpectRefused(bad, "first group of 17 elements");
  const std::string single = OneBit(10, 64, 10);
  bad = single;
  PutU32(&bad, 12, 11);  // F > count
  ExpectRefused(bad, "first group of 11 elements");
}

TEST(MalformedTest, OneBitLevels) {
  const std::string b = OneBit(100, 16, 5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad_value : {nan, inf, -inf}) {
    for (size_t at : {16u, 20u, 16u + 8 * 3 + 4}) {
      std::string bad = b;
      PutF32(&bad, at, bad_value);
      ExpectRefused(bad, "non-finite reconstruction value");
    }
  }
  std::string bad = b;
  PutF32(&bad, 16 + 8 * 2, 0.25f);  // negative-part value of group 2 > 0
  ExpectRefused(bad, "group 2: reconstruction values");
  bad = b;
  PutF32(&bad, 16 + 8 * 4 + 4, -0.25f);  // non-negative value of group 4 < 0
  ExpectRefused(bad, "group 4: reconstruction values");
}

TEST(MalformedTest, OneBitPaddingBits) {
  const std::string b = OneBit(100, 16, 5);  // 100 = 12 * 8 + 4
  std::string bad = b;
  bad.back() = static_cast<char>(static_cast<uint8_t>(bad.back()) | 0x10);
  ExpectRefused(bad, "unused bits of the last byte");
}

TEST(MalformedTest, TopKCountsThatDoNotAddUp) {
  const std::string b = TopK(3000, 40);
  std::string bad = b;
  PutU32(&bad, 8, 3001);
  ExpectRefused(bad, "k = 3001 exceeds the element count 3000");
  bad = b;
  PutU32(&bad, 8, 39);  // one value fewer: the sizes disagree
  ExpectRefused(bad, "want exactly");
  bad = b;
  PutU32(&bad, 12, GetU32(b, 12) + 1);
  ExpectRefused(bad, "want exactly");
}

// A top-k chunk with hand-written indices.
std::string TopKWith(uint32_t count, const std::vector<float>& values,
                     const std::string& index_bytes) {
  std::string s(16, '\0');
  s[0] = 2;
  s[1] = 1;
  PutU32(&s, 4, count);
  PutU32(&s, 8, values.size());
  PutU32(&s, 12, index_bytes.size());
  for (float v : values) {
    s.append(4, '\0');
    PutF32(&s, s.size() - 4, v);
  }
  return s + index_bytes;
}

TEST(MalformedTest, TopKIndices) {
  // Valid: indices 3, 4, 9 of 10.
  ASSERT_TRUE(
      ParseCompressedChunk(TopKWith(10, {1, 2, 3}, "\x03\x00\x04"s), {}).ok());
  // Index 10 of 10.
  ExpectRefused(TopKWith(10, {1, 2, 3}, "\x03\x00\x05"s),
                "index 10 of entry 2 is out of range (count 10)");
  // A gap that would wrap: "unsorted" indices cannot be written, a huge gap
  // lands out of range.
  ExpectRefused(TopKWith(10, {1, 2}, "\x03\xff\xff\xff\x7f"s), "out of range");
  ExpectRefused(TopKWith(10, {1, 2}, "\x03\x80"s), "ends inside entry 1");
  ExpectRefused(TopKWith(10, {1}, "\x80\x80\x80\x80\x01"s),
                "longer than 4 bytes");
  ExpectRefused(TopKWith(10, {1}, "\x81\x00"s), "not minimal");
  ExpectRefused(TopKWith(10, {1}, "\x01\x02"s), "1 bytes after the last");
  ExpectRefused(TopKWith(10, {1, 2, 3}, "\x03\x00"s), "ends inside entry 2");
}

TEST(MalformedTest, TopKValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  ExpectRefused(TopKWith(10, {1, nan}, "\x00\x00"s), "value 1 is nan");
  ExpectRefused(TopKWith(10, {-inf}, "\x00"s), "value 0 is -inf");
}

TEST(MalformedTest, WrongOutputSize) {
  const std::string b = OneBit(100, 16, 5);
  std::vector<float> out(99, kSentinel);
  EXPECT_EQ(DecodeCompressedChunk(b, {}, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  for (float x : out) ASSERT_EQ(x, kSentinel);
}

// Random corruption: every result is either a chunk that decodes within its
// count, or InvalidArgument with nothing written.
TEST(MalformedTest, RandomCorruption) {
  std::mt19937 rng(21);
  const std::vector<std::string> valid = {OneBit(), OneBit(333, 40, 1), TopK(),
                                          TopK(500, 500)};
  for (int trial = 0; trial < 20000; ++trial) {
    std::string b = valid[trial % valid.size()];
    const int flips = 1 + rng() % 3;
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] ^= 1 << (rng() % 8);
    if (rng() % 4 == 0) b.resize(rng() % (b.size() + 1));
    absl::StatusOr<CompressedChunk> parsed = ParseCompressedChunk(b, {});
    if (!parsed.ok()) {
      ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    std::vector<float> out(parsed->count + 1, kSentinel);
    DecodeCompressed(*parsed, 0, parsed->count, out.data());
    for (int64_t i = 0; i < parsed->count; ++i) {
      ASSERT_TRUE(std::isfinite(out[i]));
    }
    ASSERT_EQ(out.back(), kSentinel);
  }
}

}  // namespace
}  // namespace asgd
