#include "common/wire_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace asgd {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// Reference rounding in double arithmetic: the nearest bfloat16 (the
// candidates are the truncation and the next value up in magnitude), ties to
// the even mantissa, finite overflow saturating.
uint16_t ReferenceBf16(float f) {
  if (std::isnan(f)) return 0x7fc0 | ((Bits(f) >> 16) & 0x8000);
  if (std::isinf(f)) return f > 0 ? 0x7f80 : 0xff80;
  const uint16_t down = static_cast<uint16_t>(Bits(f) >> 16);  // toward zero
  const uint16_t up = down + 1;                                // away from zero
  const double x = std::fabs(static_cast<double>(f));
  const double lo = std::fabs(static_cast<double>(Bf16ToFloat(down)));
  // `up` may be the Inf pattern: measure it as the value it would be.
  const double hi =
      (up & 0x7fff) == 0x7f80 ? std::ldexp(1.0, 128)
                              : std::fabs(static_cast<double>(Bf16ToFloat(up)));
  uint16_t pick;
  if (x - lo < hi - x) {
    pick = down;
  } else if (x - lo > hi - x) {
    pick = up;
  } else {
    pick = (down & 1) == 0 ? down : up;
  }
  if ((pick & 0x7fff) == 0x7f80) pick = (pick & 0x8000) | 0x7f7f;
  return pick;
}

TEST(WireCodecTest, Bf16RoundingMatchesReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.5f,
                               3.14159f,
                               1e-40f,  // subnormal
                               std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min()};
  // Exact ties: the lower 16 bits are 0x8000, with even and odd mantissas.
  for (uint32_t u : {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f7f8000u,
                     0x7f7effffu, 0x00008000u}) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    values.push_back(f);
  }
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = any_bits(rng);
    float f;
    std::memcpy(&f, &u, sizeof(f));
    if (!std::isnan(f)) values.push_back(f);
  }
  for (float f : values) {
    ASSERT_EQ(FloatToBf16(f), ReferenceBf16(f)) << "value " << f << " bits "
                                                << std::hex << Bits(f);
  }
}

TEST(WireCodecTest, Bf16SpecialValues) {
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(
      Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lives only in the low bits must stay NaN.
  float low_nan;
  const uint32_t u = 0x7f800001u;
  std::memcpy(&low_nan, &u, sizeof(low_nan));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(low_nan))));
  // The largest float saturates instead of becoming Inf.
  EXPECT_TRUE(std::isfinite(
      Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::max()))));
  // Every bfloat16 value survives the round trip exactly.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBf16(f), b);
  }
}

TEST(WireCodecTest, EncodeDecodeRoundTripsAndBoundsTheError) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int64_t n : {1, 3, 4095, 4096, 4097, 10000}) {
    std::vector<float> src(n);
    for (float& v : src) v = normal(rng);
    for (WireDtype dtype : {WireDtype::kFloat32, WireDtype::kBfloat16}) {
      // Odd offset: the kernels must not need alignment.
      std::string wire(n * WireBytes(dtype) + 1, '\0');
      EncodeFloats(src.data(), n, dtype, &wire[1]);
      std::vector<float> back(n, -7.0f);
      ASSERT_EQ(DecodeFloats(&wire[1], n, dtype, back.data(), true), -1);
      for (int64_t i = 0; i < n; ++i) {
        if (dtype == WireDtype::kFloat32) {
          ASSERT_EQ(Bits(back[i]), Bits(src[i]));
        } else {
          ASSERT_EQ(back[i], Bf16ToFloat(FloatToBf16(src[i])));
          // Round to nearest with 8 significant bits: relative error <= 2^-8.
          ASSERT_LE(std::fabs(back[i] - src[i]), std::ldexp(std::fabs(src[i]), -8));
        }
      }
    }
  }
}

// The array kernel (a fast loop, redone per block with the careful rounding
// when a block holds Inf, NaN or a value that saturates) must give exactly
// FloatToBf16 of every element.
TEST(WireCodecTest, ArrayEncodingEqualsElementwiseRounding) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any_bits;
  const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00000u,
                               0x7f800001u, 0x7f7fffffu, 0xff7f8000u,
                               0x7f7f7fffu, 0x7f7f8000u};
  for (int64_t n : {1, 2047, 2048, 2049, 9000}) {
    std::vector<float> src(n);
    for (float& v : src) v = std::ldexp(static_cast<float>(rng() % 2001) - 1000.0f, -7);
    // Sprinkle special and random bit patterns into some blocks only.
    for (int k = 0; k < 6; ++k) {
      const uint32_t bits = k % 2 == 0 ? specials[rng() % 8] : any_bits(rng);
      std::memcpy(&src[rng() % n], &bits, sizeof(bits));
    }
    std::string wire(2 * n, '\0');
    EncodeFloats(src.data(), n, WireDtype::kBfloat16, wire.data());
    for (int64_t i = 0; i < n; ++i) {
      uint16_t got;
      std::memcpy(&got, wire.data() + 2 * i, sizeof(got));
      ASSERT_EQ(got, FloatToBf16(src[i])) << "n=" << n << " i=" << i
                                          << " bits " << std::hex
                                          << Bits(src[i]);
    }
  }
}

TEST(WireCodecTest, DecodeFindsTheFirstNonFiniteValueAnywhere) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (WireDtype dtype : {WireDtype::kFloat32, WireDtype::kBfloat16}) {
    for (int64_t n : {1, 9000}) {
      for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
        for (float b : bad) {
          std::vector<float> src(n, 1.25f);
          src[pos] = b;
          if (pos + 1 < n) src[pos + 1] = b;  // only the first is reported
          std::string wire(n * WireBytes(dtype), '\0');
          EncodeFloats(src.data(), n, dtype, wire.data());
          std::vector<float> dst(n);
          EXPECT_EQ(DecodeFloats(wire.data(), n, dtype, dst.data(), true), pos)
              << WireDtypeName(dtype) << " n=" << n << " pos=" << pos;
          EXPECT_EQ(DecodeFloats(wire.data(), n, dtype, dst.data(), false), -1);
        }
      }
    }
  }
}

TEST(WireCodecTest, ParsesNamesAndRejectsUnknownOnes) {
  EXPECT_EQ(*ParseWireDtype("fp32"), WireDtype::kFloat32);
  EXPECT_EQ(*ParseWireDtype("bfloat16"), WireDtype::kBfloat16);
  EXPECT_EQ(WireDtypeName(*ParseWireDtype("bf16")), "bf16");
  const auto bad = ParseWireDtype("fp16");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fp16"), std::string::npos);
  EXPECT_TRUE(IsKnownWireDtype(1));
  EXPECT_FALSE(IsKnownWireDtype(2));
  EXPECT_FALSE(IsKnownWireDtype(-1));
}

// A mask's bits, least significant first, against the flags one by one;
// every length from 0 to 17 (a partial last byte and none); wrong sizes and
// set padding bits are refused; PRUNE_MASK is not a pull or push dtype.
TEST(WireCodecTest, PruneMasksPackLeastSignificantBitFirst) {
  const uint8_t flags[] = {1, 0, 0, 1, 1, 1, 0, 1, 0, 1};
  char packed[2] = {0, 0};
  PackPruneMask(flags, 10, packed);
  EXPECT_EQ(static_cast<unsigned char>(packed[0]), 0xB9u);  // 1011 1001
  EXPECT_EQ(static_cast<unsigned char>(packed[1]), 0x02u);
  std::mt19937 rng(3);
  for (int64_t n = 0; n <= 17; ++n) {
    std::vector<uint8_t> keep(n), back(n, 7);
    for (auto& k : keep) k = rng() % 2;
    std::string bytes(PruneMaskBytes(n), '\xff');
    PackPruneMask(keep.data(), n, bytes.data());
    EXPECT_EQ(static_cast<int64_t>(bytes.size()), (n + 7) / 8);
    ASSERT_TRUE(UnpackPruneMask(bytes, n, back.data())) << n;
    EXPECT_EQ(back, keep) << n;
    EXPECT_FALSE(UnpackPruneMask(bytes + "x", n, back.data())) << n;
    if (n % 8 != 0) {  // a padding bit set
      std::string padded = bytes;
      padded.back() = static_cast<char>(padded.back() | 0x80);
      EXPECT_FALSE(UnpackPruneMask(padded, n, back.data())) << n;
    }
    if (n > 0) {
      EXPECT_FALSE(UnpackPruneMask(bytes.substr(1), n, back.data()));
    }
  }
  EXPECT_FALSE(IsKnownWireDtype(kPruneMaskWireDtype));
  EXPECT_FALSE(IsCompressedWireDtype(kPruneMaskWireDtype));
}

}  // namespace
}  // namespace asgd
