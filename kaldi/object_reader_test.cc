#include "kaldi/object_reader.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kaldi/bad_data.h"
#include "kaldi/input_stream.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

using testing::Bytes;
using testing::ColumnHeader;
using ::testing::HasSubstr;

std::unique_ptr<InputStream> Mem(const std::string& data) {
  return InputStream::FromMemory("mem.ark", data);
}

absl::Status ReadMatrix(const std::string& data, Matrix* m,
                        ObjectFormat* format = nullptr,
                        const ReadLimits& limits = {}) {
  auto in = Mem(data);
  return ReadMatrixObject(in.get(), limits, "utt1", m, format);
}

TEST(ObjectReaderTest, ReadsFloatMatrixExactly) {
  const std::vector<float> values = {1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7.0f};
  Matrix m;
  ObjectFormat format;
  ASSERT_TRUE(ReadMatrix(testing::FmObject(2, 3, values), &m, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kFloatMatrix);
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.data, values);
}

TEST(ObjectReaderTest, ReadsDoubleMatrixAsFloatAndAsDouble) {
  const std::vector<double> values = {0.1, 2.0, -3.5, 1e-300};
  auto in = Mem(testing::DmObject(2, 2, values));
  Matrix m;
  ObjectFormat format;
  ASSERT_TRUE(ReadMatrixObject(in.get(), {}, "k", &m, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kDoubleMatrix);
  EXPECT_EQ(m.data, std::vector<float>({0.1f, 2.0f, -3.5f, 0.0f}));
  auto in2 = Mem(testing::DmObject(2, 2, values));
  DoubleMatrix d;
  ASSERT_TRUE(ReadMatrixObject(in2.get(), {}, "k", &d).ok());
  EXPECT_EQ(d.data, values);
}

TEST(ObjectReaderTest, ReadsCompressedMatricesAsTheFormulaSays) {
  const float min = -10.0f, range = 25.0f;
  const int rows = 4, cols = 2;
  const std::vector<ColumnHeader> headers = {{0, 1000, 30000, 65535},
                                             {500, 501, 502, 503}};
  const std::vector<uint8_t> bytes = {0, 64, 192, 255, 10, 100, 200, 250};
  Matrix m;
  ObjectFormat format;
  ASSERT_TRUE(
      ReadMatrix(testing::CmObject(min, range, rows, cols, headers, bytes), &m,
                 &format)
          .ok());
  EXPECT_EQ(format, ObjectFormat::kCompressedCM);
  ASSERT_EQ(m.rows, rows);
  ASSERT_EQ(m.cols, cols);
  // Tolerance: float rounding of the decode formula, 1e-6 of the range.
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      EXPECT_NEAR(
          m.at(r, c),
          testing::CmByteValue(min, range, headers[c], bytes[c * rows + r]),
          1e-6 * range);
    }
  }

  const std::vector<uint16_t> q2 = {0, 65535, 1, 40000, 20000, 3};
  ASSERT_TRUE(
      ReadMatrix(testing::Cm2Object(min, range, 3, 2, q2), &m, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kCompressedCM2);
  EXPECT_EQ(m.rows, 3);
  for (size_t i = 0; i < q2.size(); ++i) {
    EXPECT_NEAR(m.data[i], testing::Uint16Value(min, range, q2[i]),
                1e-6 * range);
  }

  const std::vector<uint8_t> q3 = {0, 255, 17, 128};
  ASSERT_TRUE(
      ReadMatrix(testing::Cm3Object(min, range, 1, 4, q3), &m, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kCompressedCM3);
  EXPECT_EQ(m.cols, 4);
  for (size_t i = 0; i < q3.size(); ++i) {
    EXPECT_NEAR(m.data[i], testing::Cm3Value(min, range, q3[i]), 1e-6 * range);
  }
}

TEST(ObjectReaderTest, ReadsTextMatrix) {
  Matrix m;
  ObjectFormat format;
  ASSERT_TRUE(ReadMatrix(" [\n  1 2.5 -3\n  4e2 5 6 ]\n", &m, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kTextMatrix);
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.data, std::vector<float>({1, 2.5f, -3, 400, 5, 6}));
  ASSERT_TRUE(ReadMatrix("[ ]\n", &m).ok());
  EXPECT_EQ(m.rows, 0);
  ASSERT_TRUE(ReadMatrix("[ 1 nan\n inf -inf ]", &m).ok());
  EXPECT_TRUE(std::isnan(m.data[1]));
  EXPECT_TRUE(std::isinf(m.data[2]));
}

TEST(ObjectReaderTest, ReadsVectors) {
  std::vector<float> v;
  ObjectFormat format;
  auto in = Mem(testing::FvObject({0.25f, -1.0f}));
  ASSERT_TRUE(ReadFloatVectorObject(in.get(), {}, "", &v, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kFloatVector);
  EXPECT_EQ(v, std::vector<float>({0.25f, -1.0f}));
  in = Mem(testing::DvObject({3.0, 1e-3}));
  ASSERT_TRUE(ReadFloatVectorObject(in.get(), {}, "", &v, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kDoubleVector);
  EXPECT_EQ(v, std::vector<float>({3.0f, 1e-3f}));
  in = Mem(" [ 10 20\n 30 ]\n");
  ASSERT_TRUE(ReadFloatVectorObject(in.get(), {}, "", &v, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kTextVector);
  EXPECT_EQ(v, std::vector<float>({10, 20, 30}));

  std::vector<int32_t> ints;
  in = Mem(testing::Int32VectorObject({0, 7, -1, 2147483647}));
  ASSERT_TRUE(ReadInt32VectorObject(in.get(), {}, "", &ints, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kInt32Vector);
  EXPECT_EQ(ints, std::vector<int32_t>({0, 7, -1, 2147483647}));
  in = Mem("3 4 5\r\nnext");
  ASSERT_TRUE(ReadInt32VectorObject(in.get(), {}, "", &ints, &format).ok());
  EXPECT_EQ(format, ObjectFormat::kTextInt32Vector);
  EXPECT_EQ(ints, std::vector<int32_t>({3, 4, 5}));
  EXPECT_EQ(in->position(), 7);  // the line and its newline consumed
}

TEST(ObjectReaderTest, ReadsArchiveKeys) {
  auto in = Mem("  \nutt-1 X\tutt2\tY\nutt3\n[ ]\n  \n");
  std::string key;
  ASSERT_TRUE(*ReadArchiveKey(in.get(), {}, &key));
  EXPECT_EQ(key, "utt-1");
  EXPECT_EQ(in->Get(), 'X');
  ASSERT_TRUE(*ReadArchiveKey(in.get(), {}, &key));
  EXPECT_EQ(key, "utt2");
  EXPECT_EQ(in->Get(), 'Y');
  ASSERT_TRUE(*ReadArchiveKey(in.get(), {}, &key));
  EXPECT_EQ(key, "utt3");
  EXPECT_EQ(in->Peek(), '\n');  // a newline separator is left, as in Kaldi
  Matrix m;
  ASSERT_TRUE(ReadMatrixObject(in.get(), {}, key, &m).ok());
  EXPECT_FALSE(*ReadArchiveKey(in.get(), {}, &key));
}

// Every strict prefix of a binary object is a truncated object, whatever the
// cut: never a crash, never another reason.
TEST(ObjectReaderTest, EveryPrefixOfABinaryObjectIsTruncated) {
  const std::vector<std::string> matrices = {
      testing::FmObject(2, 2, {1, 2, 3, 4}),
      testing::DmObject(1, 2, {1, 2}),
      testing::CmObject(0, 1, 2, 1, {{0, 1, 2, 3}}, {5, 6}),
      testing::Cm2Object(0, 1, 1, 2, {1, 2}),
      testing::Cm3Object(0, 1, 1, 2, {1, 2}),
  };
  for (const std::string& object : matrices) {
    for (size_t n = 0; n < object.size(); ++n) {
      Matrix m;
      const absl::Status s = ReadMatrix(object.substr(0, n), &m);
      EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kTruncated)
          << "prefix " << n << " of " << object.size() << ": " << s;
    }
  }
  const std::string ints = testing::Int32VectorObject({1, 2, 3});
  for (size_t n = 0; n < ints.size(); ++n) {
    auto in = Mem(ints.substr(0, n));
    std::vector<int32_t> v;
    const absl::Status s = ReadInt32VectorObject(in.get(), {}, "k", &v);
    EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kTruncated) << n;
  }
  const std::string fv = testing::FvObject({1, 2});
  for (size_t n = 0; n < fv.size(); ++n) {
    auto in = Mem(fv.substr(0, n));
    std::vector<float> v;
    EXPECT_EQ(BadDataReasonOf(ReadFloatVectorObject(in.get(), {}, "k", &v)),
              BadDataReason::kTruncated)
        << n;
  }
}

TEST(ObjectReaderTest, ErrorsNameFileOffsetAndKeyWithAReason) {
  // The object starts at byte 5 of the stream.
  const std::string data = "utt1 " + testing::FmObject(4, 4, {1, 2});
  auto in = Mem(data);
  std::string key;
  ASSERT_TRUE(*ReadArchiveKey(in.get(), {}, &key));
  Matrix m;
  const absl::Status s = ReadMatrixObject(in.get(), {}, key, &m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kTruncated);
  EXPECT_THAT(s.message(), HasSubstr("mem.ark at byte 5 (utterance utt1)"));
  EXPECT_THAT(s.message(), HasSubstr("needs 64 bytes"));
}

TEST(ObjectReaderTest, UnknownAndUnexpectedTokens) {
  Matrix m;
  const absl::Status unknown =
      ReadMatrix(testing::BinaryHeader() + "XM " + std::string(10, '\0'), &m);
  EXPECT_EQ(BadDataReasonOf(unknown), BadDataReason::kUnknownToken);
  EXPECT_THAT(unknown.message(), HasSubstr("\"XM\""));
  EXPECT_EQ(BadDataReasonOf(
                ReadMatrix(testing::BinaryHeader() + "ABCDEFGHIJKLMNOP", &m)),
            BadDataReason::kUnknownToken);
  const absl::Status vector = ReadMatrix(testing::FvObject({1}), &m);
  EXPECT_EQ(BadDataReasonOf(vector), BadDataReason::kUnknownToken);
  EXPECT_THAT(vector.message(), HasSubstr("found a vector (FV)"));
  EXPECT_EQ(BadDataReasonOf(ReadMatrix(testing::Int32VectorObject({1}), &m)),
            BadDataReason::kUnknownToken);
  auto in = Mem(testing::FmObject(1, 1, {1}));
  std::vector<int32_t> ints;
  EXPECT_EQ(BadDataReasonOf(ReadInt32VectorObject(in.get(), {}, "k", &ints)),
            BadDataReason::kUnknownToken);
  EXPECT_EQ(BadDataReasonOf(ReadMatrix("{ 1 2 }", &m)),
            BadDataReason::kUnknownToken);
  // A space where an int32 vector's size byte belongs (found by fuzzing).
  in = Mem(testing::BinaryHeader() + " " +
           testing::Int32VectorObject({1}).substr(2));
  EXPECT_EQ(BadDataReasonOf(ReadInt32VectorObject(in.get(), {}, "k", &ints)),
            BadDataReason::kUnknownToken);
}

TEST(ObjectReaderTest, MalformedObjects) {
  Matrix m;
  Bytes size8;
  size8.Raw(testing::BinaryHeader()).Raw("FM ").U8(8).I32(1).U8(4).I32(1);
  EXPECT_EQ(BadDataReasonOf(ReadMatrix(size8.str(), &m)),
            BadDataReason::kMalformedObject);
  EXPECT_EQ(BadDataReasonOf(ReadMatrix(testing::FmObject(-1, 2, {}), &m)),
            BadDataReason::kMalformedObject);
  EXPECT_EQ(
      BadDataReasonOf(ReadMatrix(testing::Cm2Object(0, 1, 2, -3, {}), &m)),
      BadDataReason::kMalformedObject);
  EXPECT_EQ(
      BadDataReasonOf(ReadMatrix(testing::Cm3Object(NAN, 1, 1, 1, {0}), &m)),
      BadDataReason::kMalformedObject);
  EXPECT_EQ(BadDataReasonOf(ReadMatrix(std::string("\0C", 2), &m)),
            BadDataReason::kMalformedObject);
  EXPECT_EQ(BadDataReasonOf(ReadMatrix("[ 1 2\n 3 ]", &m)),
            BadDataReason::kMalformedObject);
  EXPECT_EQ(BadDataReasonOf(ReadMatrix("[ 1 x2 ]", &m)),
            BadDataReason::kMalformedObject);
  // An int32 element whose size byte is not 4.
  Bytes ints;
  ints.Raw(testing::BinaryHeader()).KaldiInt32(2).KaldiInt32(1).U8(2).I32(1);
  auto in = Mem(ints.str());
  std::vector<int32_t> v;
  EXPECT_EQ(BadDataReasonOf(ReadInt32VectorObject(in.get(), {}, "k", &v)),
            BadDataReason::kMalformedObject);
  in = Mem("1 two 3\n");
  EXPECT_EQ(BadDataReasonOf(ReadInt32VectorObject(in.get(), {}, "k", &v)),
            BadDataReason::kMalformedObject);
}

// A compressed header with range 0 (or below) would decode every value to
// min: Kaldi never writes one (a constant matrix gets range 1 + |min|), so
// it is malformed, in all three formats; an empty matrix's zero header (what
// Kaldi writes for 0 x 0) is not.
TEST(ObjectReaderTest, CompressedHeaderWithRangeZeroIsMalformed) {
  Matrix m;
  for (float range : {0.0f, -0.0f, -1.0f}) {
    const std::vector<std::string> objects = {
        testing::Cm2Object(1.0f, range, 1, 2, {3, 4}),
        testing::Cm3Object(1.0f, range, 2, 1, {7, 9}),
        testing::CmObject(1.0f, range, 2, 1, {{0, 1, 2, 3}}, {10, 200})};
    for (const std::string& object : objects) {
      const absl::Status s = ReadMatrix(object, &m);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kMalformedObject) << s;
      EXPECT_THAT(s.message(), HasSubstr("mem.ark at byte 0 (utterance utt1)"));
    }
  }
  ASSERT_TRUE(ReadMatrix(testing::Cm2Object(0.0f, 0.0f, 0, 0, {}), &m).ok());
  EXPECT_EQ(m.rows, 0);
  EXPECT_TRUE(ReadMatrix(testing::Cm2Object(1.0f, 1e-30f, 1, 1, {7}), &m).ok());
}

TEST(ObjectReaderTest, LimitsAndClaimsBeyondTheData) {
  ReadLimits small;
  small.max_elements = 10;
  Matrix m;
  EXPECT_EQ(BadDataReasonOf(
                ReadMatrix(testing::FmObject(4, 4, {}), &m, nullptr, small)),
            BadDataReason::kTooLarge);
  // 2^14 × 2^14 floats claimed, 8 bytes present: refused before allocating.
  EXPECT_EQ(
      BadDataReasonOf(ReadMatrix(testing::FmObject(16384, 16384, {1, 2}), &m)),
      BadDataReason::kTruncated);
  std::string key;
  auto in = Mem(std::string(5000, 'k') + " x");
  EXPECT_EQ(BadDataReasonOf(ReadArchiveKey(in.get(), {}, &key).status()),
            BadDataReason::kMalformedObject);
  in = Mem("key\r\n");
  EXPECT_EQ(BadDataReasonOf(ReadArchiveKey(in.get(), {}, &key).status()),
            BadDataReason::kMalformedObject);
  in = Mem("lonely-key");
  EXPECT_EQ(BadDataReasonOf(ReadArchiveKey(in.get(), {}, &key).status()),
            BadDataReason::kTruncated);
}

// A gzip'd stream (size unknown) larger than the reader's 4 MiB step.
TEST(ObjectReaderTest, ReadsLargeObjectsFromGzip) {
  const int rows = 2100, cols = 600;
  std::vector<float> values(rows * cols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * (i % 1001);
  const std::string dir = testing::MakeTempDir(::testing::TempDir(), "gz");
  const std::string path = dir + "/big.ark.gz";
  const std::string object = testing::FmObject(rows, cols, values);
  ASSERT_TRUE(testing::WriteGzipFile(path, "big " + object));
  auto in = InputStream::OpenSequential(path);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_TRUE((*in)->gzip());
  std::string key;
  ASSERT_TRUE(*ReadArchiveKey(in->get(), {}, &key));
  Matrix m;
  ASSERT_TRUE(ReadMatrixObject(in->get(), {}, key, &m).ok());
  EXPECT_EQ(m.data, values);
  // The same, cut short inside the data: truncated (gzip's own error).
  ASSERT_TRUE(testing::WriteGzipFile(path, "big " + object.substr(0, 3000000)));
  in = InputStream::OpenSequential(path);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(*ReadArchiveKey(in->get(), {}, &key));
  EXPECT_EQ(BadDataReasonOf(ReadMatrixObject(in->get(), {}, key, &m)),
            BadDataReason::kTruncated);
}

}  // namespace
}  // namespace asgd::kaldi
