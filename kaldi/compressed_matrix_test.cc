#include "kaldi/compressed_matrix.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

using testing::Bytes;
using testing::CmByteValue;
using testing::ColumnHeader;

// Everything after "\0B" of an object written by the independent writer.
std::string Body(const std::string& object) { return object.substr(2); }

// Decodes a CM/CM2/CM3 body (token, header, payload).
std::vector<float> Decode(const std::string& body) {
  const size_t space = body.find(' ');
  const std::string token = body.substr(0, space);
  const CompressedFormat format = token == "CM"
                                      ? CompressedFormat::kOneByteWithColHeaders
                                  : token == "CM2" ? CompressedFormat::kTwoByte
                                                   : CompressedFormat::kOneByte;
  const unsigned char* p =
      reinterpret_cast<const unsigned char*>(body.data()) + space + 1;
  CompressedHeader h;
  std::memcpy(&h.min_value, p, 4);
  std::memcpy(&h.range, p + 4, 4);
  std::memcpy(&h.rows, p + 8, 4);
  std::memcpy(&h.cols, p + 12, 4);
  EXPECT_EQ(
      body.size() - space - 1 - kCompressedHeaderBytes,
      static_cast<size_t>(CompressedPayloadBytes(format, h.rows, h.cols)));
  std::vector<float> out(int64_t{h.rows} * h.cols);
  DecodeCompressed(format, h, p + kCompressedHeaderBytes, out.data());
  return out;
}

// Float rounding of the decode formula: within 1e-6 of the range (the formula
// in double is the reference).
constexpr double kDecodeTolerance = 1e-6;

TEST(CompressedMatrixTest, DecodesCmAsTheFormulaSays) {
  const float min = -2.5f, range = 10.0f;
  const int rows = 9, cols = 3;
  const std::vector<ColumnHeader> headers = {{0, 10000, 40000, 65535},
                                             {100, 200, 300, 400},
                                             {65000, 65100, 65300, 65535}};
  const std::vector<uint8_t> probe = {0, 1, 63, 64, 65, 128, 192, 193, 255};
  std::vector<uint8_t> bytes;  // column-major
  for (int c = 0; c < cols; ++c) {
    for (int r = 0; r < rows; ++r) bytes.push_back(probe[(r + c) % rows]);
  }
  const std::vector<float> got =
      Decode(Body(testing::CmObject(min, range, rows, cols, headers, bytes)));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const double want =
          CmByteValue(min, range, headers[c], bytes[c * rows + r]);
      EXPECT_NEAR(got[r * cols + c], want, kDecodeTolerance * range)
          << "row " << r << " col " << c;
    }
  }
  // Spot values by hand: byte 64 is p25 exactly, 192 is p75, 255 is p100.
  EXPECT_NEAR(got[3 * cols + 0], -2.5 + 10.0 * 10000 / 65535, 1e-5);
  EXPECT_NEAR(got[6 * cols + 0], -2.5 + 10.0 * 40000 / 65535, 1e-5);
  EXPECT_NEAR(got[8 * cols + 0], 7.5, 1e-5);
}

TEST(CompressedMatrixTest, DecodesCm2AndCm3AsTheFormulaSays) {
  const float min = -1.0f, range = 4.0f;
  const std::vector<uint16_t> q2 = {0, 1, 32767, 65535, 12345, 54321};
  const std::vector<float> got2 =
      Decode(Body(testing::Cm2Object(min, range, 2, 3, q2)));
  for (size_t i = 0; i < q2.size(); ++i) {
    EXPECT_NEAR(got2[i], testing::Uint16Value(min, range, q2[i]),
                kDecodeTolerance * range);
  }
  const std::vector<uint8_t> q3 = {0, 1, 127, 128, 254, 255};
  const std::vector<float> got3 =
      Decode(Body(testing::Cm3Object(min, range, 3, 2, q3)));
  for (size_t i = 0; i < q3.size(); ++i) {
    EXPECT_NEAR(got3[i], testing::Cm3Value(min, range, q3[i]),
                kDecodeTolerance * range);
  }
}

// Encodings worked out by hand with Kaldi's quantisation
// (int(f · 65535 + 0.499), int(f · 255 + 0.499)).
TEST(CompressedMatrixTest, EncodesCm2AndCm3BitExactly) {
  const std::vector<float> data = {0, 1, 2, 3};
  std::string cm2;
  ASSERT_TRUE(
      EncodeCompressed(data.data(), 1, 4, CompressionMethod::kTwoByte, &cm2)
          .ok());
  EXPECT_EQ(cm2,
            Body(testing::Cm2Object(0, 3, 1, 4, {0, 21845, 43690, 65535})));
  std::string cm3;
  ASSERT_TRUE(
      EncodeCompressed(data.data(), 4, 1, CompressionMethod::kOneByte, &cm3)
          .ok());
  EXPECT_EQ(cm3, Body(testing::Cm3Object(0, 3, 4, 1, {0, 85, 170, 255})));
}

TEST(CompressedMatrixTest, EncodesCmBitExactly) {
  // One column 0..4: range 4; quartiles of 5 rows at positions 0, 1, 3, 4:
  // p0 = 0, p25 = int(0.25·65535 + 0.499) = 16384, p75 = 49151, p100 = 65535.
  // Bytes: 0 -> 0; 1 is just below p25 (1.00006) -> 64; 2 is the middle of
  // [p25, p75] -> 128; 3 is just above p75 (2.99998) -> 192; 4 -> 255.
  const std::vector<float> data = {0, 1, 2, 3, 4};
  std::string cm;
  ASSERT_TRUE(EncodeCompressed(data.data(), 5, 1,
                               CompressionMethod::kSpeechFeature, &cm)
                  .ok());
  EXPECT_EQ(cm, Body(testing::CmObject(0, 4, 5, 1, {{0, 16384, 49151, 65535}},
                                       {0, 64, 128, 192, 255})));
}

TEST(CompressedMatrixTest, AutoPicksCmAbove8RowsElseCm2) {
  std::vector<float> data(9 * 2, 1.0f);
  data[3] = 2.0f;
  std::string nine, eight;
  ASSERT_TRUE(
      EncodeCompressed(data.data(), 9, 2, CompressionMethod::kAuto, &nine)
          .ok());
  ASSERT_TRUE(
      EncodeCompressed(data.data(), 8, 2, CompressionMethod::kAuto, &eight)
          .ok());
  EXPECT_EQ(nine.substr(0, 3), "CM ");
  EXPECT_EQ(eight.substr(0, 4), "CM2 ");
}

// Round trip of speech-like data through CM: each value within half a step of
// its column's piecewise-linear grid, plus one uint16 step of the range for
// the quantised column bounds.
TEST(CompressedMatrixTest, CmRoundTripWithinTheGridStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int rows = 300, cols = 40;
  std::vector<float> data(rows * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) data[r * cols + c] = c * 0.5f + normal(rng);
  }
  std::string cm;
  ASSERT_TRUE(EncodeCompressed(data.data(), rows, cols,
                               CompressionMethod::kSpeechFeature, &cm)
                  .ok());
  const std::vector<float> got = Decode(cm);
  float min, range;
  std::memcpy(&min, cm.data() + 3, 4);
  std::memcpy(&range, cm.data() + 7, 4);
  const unsigned char* headers =
      reinterpret_cast<const unsigned char*>(cm.data()) + 3 + 16;
  double worst = 0;
  for (int c = 0; c < cols; ++c) {
    ColumnHeader h;
    const unsigned char* p = headers + 8 * c;
    h.p0 = p[0] | p[1] << 8;
    h.p25 = p[2] | p[3] << 8;
    h.p75 = p[4] | p[5] << 8;
    h.p100 = p[6] | p[7] << 8;
    ASSERT_LT(h.p0, h.p25);
    ASSERT_LT(h.p25, h.p75);
    ASSERT_LT(h.p75, h.p100);
    const double q0 = testing::Uint16Value(min, range, h.p0),
                 q25 = testing::Uint16Value(min, range, h.p25),
                 q75 = testing::Uint16Value(min, range, h.p75),
                 q100 = testing::Uint16Value(min, range, h.p100);
    const double slack = range / 65535.0 + 1e-6 * range;
    for (int r = 0; r < rows; ++r) {
      const double x = data[r * cols + c];
      const double step = x < q25   ? (q25 - q0) / 64
                          : x < q75 ? (q75 - q25) / 128
                                    : (q100 - q75) / 63;
      const double err = std::fabs(got[r * cols + c] - x);
      EXPECT_LE(err, step / 2 + slack) << "row " << r << " col " << c;
      worst = std::max(worst, err / range);
    }
  }
  EXPECT_LT(worst, 0.01);  // of the range: CM is a one-byte code
}

TEST(CompressedMatrixTest, Cm2RoundTripWithinHalfAStep) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-50.0f, 20.0f);
  std::vector<float> data(7 * 13);
  for (float& v : data) v = u(rng);
  std::string cm2;
  ASSERT_TRUE(
      EncodeCompressed(data.data(), 7, 13, CompressionMethod::kAuto, &cm2)
          .ok());
  ASSERT_EQ(cm2.substr(0, 4), "CM2 ");
  const std::vector<float> got = Decode(cm2);
  float range;
  std::memcpy(&range, cm2.data() + 8, 4);
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_LE(std::fabs(got[i] - data[i]), range / 131070.0 + 1e-5 * range);
  }
}

TEST(CompressedMatrixTest, ConstantMatrixWidensTheRangeAsKaldiDoes) {
  const std::vector<float> data(20, 5.0f);
  std::string cm;
  ASSERT_TRUE(EncodeCompressed(data.data(), 10, 2,
                               CompressionMethod::kSpeechFeature, &cm)
                  .ok());
  float min, range;
  std::memcpy(&min, cm.data() + 3, 4);
  std::memcpy(&range, cm.data() + 7, 4);
  EXPECT_EQ(min, 5.0f);
  EXPECT_EQ(range, 6.0f);  // max = min + (1 + |min|)
  for (float v : Decode(cm)) EXPECT_NEAR(v, 5.0f, 6.0 / 65535 + 1e-5);
}

TEST(CompressedMatrixTest, RefusesNanAndInf) {
  std::vector<float> data = {1, 2, std::nanf(""), 4};
  std::string out;
  EXPECT_EQ(EncodeCompressed(data.data(), 2, 2, CompressionMethod::kAuto, &out)
                .code(),
            absl::StatusCode::kInvalidArgument);
  data[2] = INFINITY;
  EXPECT_EQ(EncodeCompressed(data.data(), 2, 2, CompressionMethod::kAuto, &out)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CompressedMatrixTest, EmptyMatrixIsAZeroHeader) {
  std::string out;
  ASSERT_TRUE(
      EncodeCompressed(nullptr, 0, 0, CompressionMethod::kAuto, &out).ok());
  EXPECT_EQ(out, Body(testing::CmObject(0, 0, 0, 0, {}, {})));
}

}  // namespace
}  // namespace asgd::kaldi
