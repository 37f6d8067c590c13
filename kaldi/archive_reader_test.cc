#include "kaldi/archive_reader.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kaldi/bad_data.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

using ::testing::HasSubstr;

class ArchiveReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir(::testing::TempDir(), "archive_reader");
  }
  std::string dir_;
};

TEST_F(ArchiveReaderTest, ReadsAWholeArchiveOfMixedObjects) {
  testing::TestArchive ark;
  ark.Add("fm", testing::FmObject(1, 2, {1, 2}));
  ark.Add("cm2", testing::Cm2Object(0, 2, 1, 1, {65535}));
  ark.AddRaw("text  [\n 3 4\n 5 6 ]\n");
  ark.Add("dm", testing::DmObject(1, 1, {0.5}));
  for (bool gzip : {false, true}) {
    const std::string path = dir_ + (gzip ? "/mixed.ark.gz" : "/mixed.ark");
    if (gzip) {
      ASSERT_TRUE(testing::WriteGzipFile(path, ark.bytes()));
    } else {
      testing::WriteFile(path, ark.bytes());
    }
    auto reader = SequentialArchiveReader::Open(path);
    ASSERT_TRUE(reader.ok());
    std::vector<std::string> keys;
    std::vector<std::vector<float>> values;
    Matrix m;
    while (true) {
      absl::StatusOr<bool> more = (*reader)->Next();
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      keys.push_back((*reader)->key());
      if (keys.back() == "fm") {
        EXPECT_EQ((*reader)->object_offset(), ark.offset("fm"));
      }
      ASSERT_TRUE((*reader)->ReadMatrix(&m).ok());
      values.push_back(m.data);
    }
    EXPECT_EQ(keys, std::vector<std::string>({"fm", "cm2", "text", "dm"}));
    EXPECT_EQ(values[0], std::vector<float>({1, 2}));
    EXPECT_NEAR(values[1][0], 2.0, 1e-6);
    EXPECT_EQ(values[2], std::vector<float>({3, 4, 5, 6}));
    EXPECT_EQ(values[3], std::vector<float>({0.5}));
  }
}

TEST_F(ArchiveReaderTest, AnErrorEndsTheArchive) {
  testing::TestArchive ark;
  ark.Add("a", testing::FmObject(1, 1, {1}));
  ark.Add("b", testing::BinaryHeader() + "QQ " + std::string(9, '\0'));
  ark.Add("c", testing::FmObject(1, 1, {3}));
  testing::WriteFile(dir_ + "/bad.ark", ark.bytes());
  auto reader = SequentialArchiveReader::Open(dir_ + "/bad.ark");
  ASSERT_TRUE(reader.ok());
  Matrix m;
  ASSERT_TRUE(*(*reader)->Next());
  ASSERT_TRUE((*reader)->ReadMatrix(&m).ok());
  ASSERT_TRUE(*(*reader)->Next());
  const absl::Status s = (*reader)->ReadMatrix(&m);
  EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kUnknownToken);
  EXPECT_THAT(s.message(),
              HasSubstr("at byte " + std::to_string(ark.offset("b")) +
                        " (utterance b)"));
  EXPECT_EQ((*reader)->Next().status(), s);
}

TEST_F(ArchiveReaderTest, RandomAccessByOffsetWithRanges) {
  testing::TestArchive ark;
  std::vector<float> big(6 * 3);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i);
  ark.Add("u1", testing::FmObject(6, 3, big));
  ark.Add("u2", testing::Cm3Object(0, 255, 2, 2, {1, 2, 3, 4}));
  testing::WriteFile(dir_ + "/feats.ark", ark.bytes());
  RxfilenameReader reader;
  Rxfilename rx;
  rx.path = dir_ + "/feats.ark";
  rx.has_offset = true;
  rx.offset = ark.offset("u2");
  Matrix m;
  ASSERT_TRUE(reader.ReadMatrix(rx, "u2", &m).ok());
  EXPECT_EQ(m.data, std::vector<float>({1, 2, 3, 4}));
  rx.offset = ark.offset("u1");
  rx.has_range = true;
  rx.range = {4, 5, 1, 2};
  ASSERT_TRUE(reader.ReadMatrix(rx, "u1", &m).ok());
  EXPECT_EQ(m.data, std::vector<float>({13, 14, 16, 17}));
  EXPECT_EQ(reader.total_opens(), 1);
}

TEST_F(ArchiveReaderTest, OffsetPastTheEnd) {
  testing::WriteFile(dir_ + "/f.ark", "k " + testing::FmObject(1, 1, {1}));
  RxfilenameReader reader;
  Rxfilename rx;
  rx.path = dir_ + "/f.ark";
  rx.has_offset = true;
  Matrix m;
  for (int64_t offset :
       {int64_t{21}, int64_t{22}, int64_t{1} << 40}) {  // 21 bytes
    rx.offset = offset;
    const absl::Status s = reader.ReadMatrix(rx, "k", &m);
    EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kOffsetPastEnd) << offset;
    EXPECT_THAT(s.message(),
                HasSubstr("f.ark at byte " + std::to_string(offset)));
  }
  rx.path = dir_ + "/missing.ark";
  rx.offset = 0;
  EXPECT_EQ(reader.ReadMatrix(rx, "k", &m).code(), absl::StatusCode::kNotFound);
}

TEST_F(ArchiveReaderTest, KeepsAtMostMaxOpenFiles) {
  std::vector<std::string> paths;
  for (int i = 0; i < 5; ++i) {
    paths.push_back(dir_ + "/p" + std::to_string(i) + ".ark");
    testing::WriteFile(paths.back(),
                       "k " + testing::FmObject(1, 1, {float(i)}));
  }
  RxfilenameReader reader(/*max_open_files=*/2);
  Matrix m;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5; ++i) {
      Rxfilename rx;
      rx.path = paths[i];
      rx.has_offset = true;
      rx.offset = 2;
      ASSERT_TRUE(reader.ReadMatrix(rx, "k", &m).ok());
      EXPECT_EQ(m.data[0], i);
      EXPECT_LE(reader.open_files(), 2);
    }
  }
  EXPECT_EQ(reader.total_opens(), 15);  // each read evicted the oldest
}

// Priors files: a binary float or double vector, or text.
TEST_F(ArchiveReaderTest, ReadsAVectorFileInEveryForm) {
  testing::WriteFile(dir_ + "/fv", testing::FvObject({0.5f, 0.25f, 0.25f}));
  testing::WriteFile(dir_ + "/dv", testing::DvObject({0.5, 0.125}));
  testing::WriteFile(dir_ + "/text", " [ 0.5 0.375 0.125 ]\n");
  EXPECT_EQ(*ReadFloatVectorFile(dir_ + "/fv"),
            (std::vector<float>{0.5f, 0.25f, 0.25f}));
  EXPECT_EQ(*ReadFloatVectorFile(dir_ + "/dv"),
            (std::vector<float>{0.5f, 0.125f}));
  EXPECT_EQ(*ReadFloatVectorFile(dir_ + "/text"),
            (std::vector<float>{0.5f, 0.375f, 0.125f}));
  testing::WriteFile(dir_ + "/extra", testing::FvObject({1.0f}) + "x");
  auto extra = ReadFloatVectorFile(dir_ + "/extra");
  EXPECT_EQ(BadDataReasonOf(extra.status()), BadDataReason::kMalformedObject);
  testing::WriteFile(dir_ + "/matrix", testing::FmObject(1, 2, {1, 2}));
  EXPECT_TRUE(IsBadData(ReadFloatVectorFile(dir_ + "/matrix").status()));
  EXPECT_EQ(ReadFloatVectorFile(dir_ + "/none").status().code(),
            absl::StatusCode::kNotFound);
  // A matrix file (global CMVN statistics), double or float.
  testing::WriteFile(dir_ + "/dm", testing::DmObject(2, 2, {1, 2, 3, 4}));
  testing::WriteFile(dir_ + "/fm", testing::FmObject(1, 2, {0.5f, 8}));
  auto dm = ReadDoubleMatrixFile(dir_ + "/dm");
  ASSERT_TRUE(dm.ok()) << dm.status();
  EXPECT_EQ(dm->data, (std::vector<double>{1, 2, 3, 4}));
  auto fm = ReadDoubleMatrixFile(dir_ + "/fm");
  ASSERT_TRUE(fm.ok());
  EXPECT_EQ(fm->rows, 1);
  EXPECT_EQ(fm->data, (std::vector<double>{0.5, 8}));
  EXPECT_TRUE(IsBadData(ReadDoubleMatrixFile(dir_ + "/fv").status()));
}

}  // namespace
}  // namespace asgd::kaldi
