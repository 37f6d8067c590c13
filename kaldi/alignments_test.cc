#include "kaldi/alignments.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

class AlignmentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir(::testing::TempDir(), "alignments");
  }
  std::string dir_;
};

TEST_F(AlignmentsTest, ExpandsGlobsAndLists) {
  for (const char* name : {"pdf.1.gz", "pdf.2.gz", "pdf.10.gz", "other.ark"}) {
    testing::WriteFile(dir_ + "/" + name, "");
  }
  auto files = ExpandFileList(dir_ + "/pdf.*.gz, " + dir_ + "/other.ark");
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files, std::vector<std::string>(
                        {dir_ + "/pdf.1.gz", dir_ + "/pdf.10.gz",
                         dir_ + "/pdf.2.gz", dir_ + "/other.ark"}));
  EXPECT_EQ(ExpandFileList(dir_ + "/nothing.*").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ExpandFileList(" , ").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Binary gzip'd, binary plain and text files, read in order; a truncated file
// loses its tail and reading goes on with the next file.
TEST_F(AlignmentsTest, ReadsEveryKindAndSurvivesATruncatedFile) {
  testing::TestArchive a;
  a.Add("u1", testing::Int32VectorObject({0, 0, 5}));
  a.Add("u2", testing::Int32VectorObject({7}));
  ASSERT_TRUE(testing::WriteGzipFile(dir_ + "/ali.1.gz", a.bytes()));
  testing::TestArchive b;
  b.Add("u3", testing::Int32VectorObject({1, 2}));
  b.Add("u4", testing::Int32VectorObject({1, 2, 3, 4}));
  testing::WriteFile(dir_ + "/ali.2.ark",
                     b.bytes().substr(0, b.bytes().size() - 3));
  testing::WriteFile(dir_ + "/ali.3.txt", "u5 4 4 4\nu6 9\n");
  auto reader = AlignmentReader::Open(
      {dir_ + "/ali.1.gz", dir_ + "/ali.2.ark", dir_ + "/ali.3.txt"});
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> keys;
  std::vector<std::vector<int32_t>> labels;
  AlignmentEntry e;
  int errors = 0;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&e);
    if (!more.ok()) {
      EXPECT_EQ(BadDataReasonOf(more.status()), BadDataReason::kTruncated);
      EXPECT_EQ(e.key, "u4");
      ++errors;
      continue;
    }
    if (!*more) break;
    keys.push_back(e.key);
    labels.push_back(e.labels);
  }
  EXPECT_EQ(errors, 1);
  EXPECT_EQ((*reader)->files_cut_short(), 1);
  EXPECT_EQ(keys, std::vector<std::string>({"u1", "u2", "u3", "u5", "u6"}));
  EXPECT_EQ(labels[0], std::vector<int32_t>({0, 0, 5}));
  EXPECT_EQ(labels[3], std::vector<int32_t>({4, 4, 4}));
  EXPECT_EQ(e.file_index, 2);
}

TEST_F(AlignmentsTest, AMissingFileEndsTheReader) {
  auto reader = AlignmentReader::Open({dir_ + "/missing.gz"});
  ASSERT_TRUE(reader.ok());
  AlignmentEntry e;
  EXPECT_EQ((*reader)->Next(&e).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*reader)->Next(&e).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace asgd::kaldi
