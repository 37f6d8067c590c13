#include "kaldi/archive_writer.h"

#include <unistd.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kaldi/archive_reader.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

class ArchiveWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir(::testing::TempDir(), "archive_writer");
  }
  bool Exists(const std::string& path) {
    return ::access(path.c_str(), F_OK) == 0;
  }
  std::string dir_;
};

// The writer's bytes equal the independent writer's, entry by entry.
TEST_F(ArchiveWriterTest, WritesTheFormatByteForByte) {
  ArchiveWriterOptions o;
  o.ark_path = dir_ + "/out.ark";
  o.scp_path = dir_ + "/out.scp";
  auto w = ArchiveWriter::Create(o);
  ASSERT_TRUE(w.ok());
  const std::vector<float> m = {1.5f, -2, 0, 4e-3f, 7, 8};
  ASSERT_TRUE((*w)->WriteMatrix("utt1", m.data(), 2, 3).ok());
  ASSERT_TRUE(
      (*w)->WriteFloatVector("prior", std::vector<float>{0.25f, 0.75f}).ok());
  ASSERT_TRUE(
      (*w)->WriteInt32Vector("ali", std::vector<int32_t>{3, 0, -1}).ok());
  DoubleMatrix stats;
  stats.Resize(2, 2);
  stats.data = {1, 2, 3, 0};
  ASSERT_TRUE((*w)->WriteDoubleMatrix("spk", stats).ok());
  EXPECT_FALSE(Exists(o.ark_path));  // not before Close()
  ASSERT_TRUE((*w)->Close().ok());

  testing::TestArchive want;
  want.Add("utt1", testing::FmObject(2, 3, m));
  want.Add("prior", testing::FvObject({0.25f, 0.75f}));
  want.Add("ali", testing::Int32VectorObject({3, 0, -1}));
  want.Add("spk", testing::DmObject(2, 2, {1, 2, 3, 0}));
  EXPECT_EQ(testing::ReadFile(o.ark_path), want.bytes());
  EXPECT_EQ(testing::ReadFile(o.scp_path),
            absl::StrCat("utt1 ", o.ark_path, ":", want.offset("utt1"), "\n",
                         "prior ", o.ark_path, ":", want.offset("prior"), "\n",
                         "ali ", o.ark_path, ":", want.offset("ali"), "\n",
                         "spk ", o.ark_path, ":", want.offset("spk"), "\n"));
  EXPECT_FALSE(Exists(o.ark_path + ".tmp"));
}

// Compressed archives read back through their scp within the format's
// precision (second check; the bit-level one is compressed_matrix_test).
TEST_F(ArchiveWriterTest, CompressedRoundTripThroughTheScp) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(1.0f, 4.0f);
  std::vector<std::vector<float>> utts;
  const std::vector<int> rows = {50, 8, 3, 120};
  for (int r : rows) {
    std::vector<float> u(r * 13);
    for (float& v : u) v = normal(rng);
    utts.push_back(u);
  }
  ArchiveWriterOptions o;
  o.ark_path = dir_ + "/feats.ark";
  o.scp_path = dir_ + "/feats.scp";
  o.matrix_format = MatrixFormat::kCompressedAuto;
  auto w = ArchiveWriter::Create(o);
  ASSERT_TRUE(w.ok());
  for (size_t i = 0; i < utts.size(); ++i) {
    ASSERT_TRUE(
        (*w)->WriteMatrix("u" + std::to_string(i), utts[i].data(), rows[i], 13)
            .ok());
  }
  ASSERT_TRUE((*w)->Close().ok());
  RxfilenameReader reader;
  size_t i = 0;
  for (absl::string_view line :
       absl::StrSplit(testing::ReadFile(o.scp_path), '\n', absl::SkipEmpty())) {
    const std::vector<std::string> parts = absl::StrSplit(line, ' ');
    auto rx = ParseRxfilename(parts[1], {});
    ASSERT_TRUE(rx.ok());
    Matrix m;
    ObjectFormat format;
    ASSERT_TRUE(reader.ReadMatrix(*rx, parts[0], &m, &format).ok());
    EXPECT_EQ(format, rows[i] > 8 ? ObjectFormat::kCompressedCM
                                  : ObjectFormat::kCompressedCM2);
    ASSERT_EQ(m.rows, rows[i]);
    float lo = utts[i][0], hi = utts[i][0];
    for (float v : utts[i]) lo = std::min(lo, v), hi = std::max(hi, v);
    // CM: one byte per value on a per-column grid; worst step 1/63 of the
    // column's top quarter, bounded here by 2% of the matrix's range.
    const double tolerance = (rows[i] > 8 ? 0.02 : 1.0 / 65535) * (hi - lo);
    for (size_t k = 0; k < m.data.size(); ++k) {
      ASSERT_NEAR(m.data[k], utts[i][k], tolerance) << "utt " << i;
    }
    ++i;
  }
  EXPECT_EQ(i, utts.size());
}

TEST_F(ArchiveWriterTest, GzipArchivesAndRefusals) {
  ArchiveWriterOptions o;
  o.ark_path = dir_ + "/ali.1.gz";
  auto w = ArchiveWriter::Create(o);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->WriteInt32Vector("u", std::vector<int32_t>{5, 6}).ok());
  EXPECT_EQ((*w)->WriteInt32Vector("bad key", std::vector<int32_t>{}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*w)->WriteInt32Vector("", std::vector<int32_t>{}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*w)->Close().ok());
  auto reader = SequentialArchiveReader::Open(o.ark_path);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(*(*reader)->Next());
  std::vector<int32_t> v;
  ASSERT_TRUE((*reader)->ReadInt32Vector(&v).ok());
  EXPECT_EQ(v, std::vector<int32_t>({5, 6}));

  o.scp_path = dir_ + "/ali.scp";
  EXPECT_EQ(ArchiveWriter::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.ark_path = dir_ + "/no/such/dir/x.ark";
  o.scp_path = "";
  EXPECT_EQ(ArchiveWriter::Create(o).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ArchiveWriterTest, CompressingNanFailsAndNothingAppears) {
  ArchiveWriterOptions o;
  o.ark_path = dir_ + "/nan.ark";
  o.matrix_format = MatrixFormat::kCompressedCM;
  {
    auto w = ArchiveWriter::Create(o);
    ASSERT_TRUE(w.ok());
    const std::vector<float> m = {1, NAN, 3, 4};
    EXPECT_EQ((*w)->WriteMatrix("u", m.data(), 2, 2).code(),
              absl::StatusCode::kInvalidArgument);
    // Destroyed without Close(): the temporary file is removed.
  }
  EXPECT_FALSE(Exists(o.ark_path));
  EXPECT_FALSE(Exists(o.ark_path + ".tmp"));
}

TEST_F(ArchiveWriterTest, VectorFiles) {
  ASSERT_TRUE(WriteFloatVectorFile(dir_ + "/prior.vec", {0.5f, 0.125f}).ok());
  EXPECT_EQ(testing::ReadFile(dir_ + "/prior.vec"),
            testing::FvObject({0.5f, 0.125f}));
  ASSERT_TRUE(
      WriteFloatVectorFile(dir_ + "/prior.txt", {0.5f, 0.125f}, false).ok());
  EXPECT_EQ(testing::ReadFile(dir_ + "/prior.txt"), " [ 0.5 0.125 ]\n");
  ASSERT_TRUE(WriteDoubleVectorFile(dir_ + "/counts", {3, 0, 12}).ok());
  EXPECT_EQ(testing::ReadFile(dir_ + "/counts"), " [ 3 0 12 ]\n");
  ASSERT_TRUE(WriteDoubleVectorFile(dir_ + "/counts.bin", {3, 0}, true).ok());
  EXPECT_EQ(testing::ReadFile(dir_ + "/counts.bin"), testing::DvObject({3, 0}));
  EXPECT_EQ(ParseMatrixFormat("compressed").value(),
            MatrixFormat::kCompressedAuto);
  EXPECT_EQ(ParseMatrixFormat("CM").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd::kaldi
