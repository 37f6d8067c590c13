#include "kaldi/scp.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

using ::testing::HasSubstr;

const DataLocation kWhere{"data/feats.scp", 100, 7, "utt9"};

TEST(RxfilenameTest, ParsesOffsetsAndRanges) {
  auto rx = ParseRxfilename("/a/raw_fbank.1.ark:1234", kWhere);
  ASSERT_TRUE(rx.ok());
  EXPECT_EQ(rx->path, "/a/raw_fbank.1.ark");
  EXPECT_TRUE(rx->has_offset);
  EXPECT_EQ(rx->offset, 1234);
  EXPECT_FALSE(rx->has_range);

  rx = ParseRxfilename("x.ark:5[0:99]", kWhere);
  ASSERT_TRUE(rx.ok());
  EXPECT_EQ(rx->offset, 5);
  EXPECT_TRUE(rx->has_range);
  EXPECT_EQ(rx->range.row_begin, 0);
  EXPECT_EQ(rx->range.row_last, 99);
  EXPECT_EQ(rx->range.col_last, -1);
  EXPECT_EQ(rx->ToString(), "x.ark:5[0:99]");

  rx = ParseRxfilename("x.ark:5[10:19,0:12]", kWhere);
  ASSERT_TRUE(rx.ok());
  EXPECT_EQ(rx->range.row_begin, 10);
  EXPECT_EQ(rx->range.col_last, 12);
  rx = ParseRxfilename("x.ark:5[:,2:3]", kWhere);
  ASSERT_TRUE(rx.ok());
  EXPECT_EQ(rx->range.row_last, -1);
  EXPECT_EQ(rx->range.col_begin, 2);

  rx = ParseRxfilename("data/cmvn_spk1.mat", kWhere);  // one object, no key
  ASSERT_TRUE(rx.ok());
  EXPECT_FALSE(rx->has_offset);
  EXPECT_EQ(rx->offset, 0);
  rx = ParseRxfilename("C:weird:name", kWhere);  // not an offset
  ASSERT_TRUE(rx.ok());
  EXPECT_EQ(rx->path, "C:weird:name");
}

TEST(RxfilenameTest, RefusesPipesAndStdinNamingTheLine) {
  for (const char* text :
       {"compute-fbank-feats scp:wav.scp ark:- |", "-", "| gzip -c > x"}) {
    const absl::Status s = ParseRxfilename(text, kWhere).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << text;
    EXPECT_THAT(s.message(), HasSubstr("data/feats.scp line 7")) << text;
  }
}

TEST(RxfilenameTest, MalformedOffsetsAndRanges) {
  for (const char* text : {"x.ark:12x", "x.ark:1[0:9", "x.ark:1[9:0]",
                           "x.ark:1[a:b]", "x.ark:1[0:1,2:3,4:5]", ":12",
                           "x.ark:1[-1:3]", "x.ark:99999999999999999999"}) {
    const absl::Status s = ParseRxfilename(text, kWhere).status();
    EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kMalformedLine) << text;
    EXPECT_THAT(s.message(), HasSubstr("utt9")) << text;
  }
}

Matrix Counting(int rows, int cols) {
  Matrix m;
  m.Resize(rows, cols);
  for (int i = 0; i < rows * cols; ++i) m.data[i] = static_cast<float>(i);
  return m;
}

TEST(ApplyRangeTest, SelectsRowsAndColumnsInclusively) {
  Matrix m = Counting(5, 4);
  MatrixRange r;
  r.row_begin = 1;
  r.row_last = 2;
  r.col_begin = 2;
  r.col_last = 3;
  ASSERT_TRUE(ApplyRange(r, kWhere, &m).ok());
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 2);
  EXPECT_EQ(m.data, std::vector<float>({6, 7, 10, 11}));
}

TEST(ApplyRangeTest, KaldiToleranceOfThreeRowsPastTheEnd) {
  Matrix m = Counting(5, 2);
  MatrixRange r;
  r.row_begin = 3;
  r.row_last = 7;  // 3 past the last row (4): clamped to it
  ASSERT_TRUE(ApplyRange(r, kWhere, &m).ok());
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.data, std::vector<float>({6, 7, 8, 9}));
  for (auto [b, l, cb, cl] : std::vector<std::array<int, 4>>{
           {0, 8, 0, -1}, {5, 6, 0, -1}, {0, 1, 0, 2}}) {
    Matrix n = Counting(5, 2);
    MatrixRange bad{b, l, cb, cl};
    EXPECT_EQ(BadDataReasonOf(ApplyRange(bad, kWhere, &n)),
              BadDataReason::kBadRange)
        << b << ":" << l << "," << cb << ":" << cl;
  }
}

TEST(ScpReaderTest, ReadsLinesAndGoesOnAfterABadOne) {
  const std::string dir = testing::MakeTempDir(::testing::TempDir(), "scp");
  testing::WriteFile(dir + "/feats.scp",
                     "a /x/1.ark:10\n\n  b\trel/2.ark:20[0:3]  \nc\n"
                     "d cat x |\ne 3.ark:7x\nf /x/1.ark:30");
  ScpOptions options;
  options.base_dir = "/base";
  auto scp = ScpReader::Open(dir + "/feats.scp", options);
  ASSERT_TRUE(scp.ok());
  ScpEntry e;
  ASSERT_TRUE(*(*scp)->Next(&e));
  EXPECT_EQ(e.key, "a");
  EXPECT_EQ(e.rx.offset, 10);
  EXPECT_EQ(e.index, 0);
  ASSERT_TRUE(*(*scp)->Next(&e));
  EXPECT_EQ(e.key, "b");
  EXPECT_EQ(e.rx.path, "/base/rel/2.ark");
  EXPECT_EQ(e.rx.range.row_last, 3);
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.index, 1);  // blank lines do not count
  absl::StatusOr<bool> more = (*scp)->Next(&e);
  EXPECT_EQ(BadDataReasonOf(more.status()), BadDataReason::kMalformedLine);
  EXPECT_EQ(e.key, "c");
  EXPECT_EQ(e.index, 2);
  more = (*scp)->Next(&e);
  EXPECT_EQ(more.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(more.status().message(), HasSubstr("feats.scp line 5"));
  more = (*scp)->Next(&e);
  EXPECT_EQ(BadDataReasonOf(more.status()), BadDataReason::kMalformedLine);
  ASSERT_TRUE(*(*scp)->Next(&e));  // last line without a newline
  EXPECT_EQ(e.key, "f");
  EXPECT_EQ(e.index, 5);
  EXPECT_FALSE(*(*scp)->Next(&e));
}

TEST(ScpReaderTest, OverlongLinesAreMalformedAndSkipped) {
  const std::string dir = testing::MakeTempDir(::testing::TempDir(), "scp");
  testing::WriteFile(dir + "/t", "k " + std::string(300, 'x') + "\nok v\n");
  auto table = TextTableReader::Open(dir + "/t", /*max_line_bytes=*/100);
  ASSERT_TRUE(table.ok());
  std::string key, value;
  EXPECT_EQ(BadDataReasonOf((*table)->Next(&key, &value).status()),
            BadDataReason::kMalformedLine);
  ASSERT_TRUE(*(*table)->Next(&key, &value));
  EXPECT_EQ(key, "ok");
  EXPECT_EQ(value, "v");
  EXPECT_EQ((*table)->line(), 2);
}

}  // namespace
}  // namespace asgd::kaldi
