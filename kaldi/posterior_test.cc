// Kaldi posteriors: ReadPosteriorObject against an independent byte writer
// (binary with float and double weights, text as WritePosterior writes it),
// every prefix truncated, malformed objects and limits refused with their
// reasons; ArchiveWriter::WritePosterior read back; PosteriorReader over a
// file list that survives a truncated file.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kaldi/alignments.h"
#include "kaldi/archive_writer.h"
#include "kaldi/bad_data.h"
#include "kaldi/input_stream.h"
#include "kaldi/object_reader.h"
#include "kaldi/test_archive.h"

namespace asgd::kaldi {
namespace {

absl::Status Read(const std::string& data, Posterior* post,
                  ObjectFormat* format = nullptr,
                  const ReadLimits& limits = {}) {
  auto in = InputStream::FromMemory("post.ark", data);
  return ReadPosteriorObject(in.get(), limits, "utt1", post, format);
}

const std::vector<std::vector<std::pair<int32_t, double>>> kPost = {
    {{3, 0.75}, {12, 0.25}}, {}, {{0, 1.0}}, {{7, 0.5}, {7, 0.5}, {2, 1e-30}}};

Posterior AsFloat(
    const std::vector<std::vector<std::pair<int32_t, double>>>& post) {
  Posterior out;
  for (const auto& frame : post) {
    auto& f = out.emplace_back();
    for (const auto& [id, w] : frame) f.emplace_back(id, static_cast<float>(w));
  }
  return out;
}

TEST(PosteriorTest, ReadsBinaryWithFloatAndDoubleWeights) {
  for (bool doubles : {false, true}) {
    Posterior post;
    ObjectFormat format;
    ASSERT_TRUE(
        Read(testing::PosteriorObject(kPost, doubles), &post, &format).ok());
    EXPECT_EQ(format, ObjectFormat::kPosterior);
    EXPECT_EQ(post, AsFloat(kPost)) << doubles;
  }
  Posterior empty = {{{1, 1.0f}}};
  ASSERT_TRUE(Read(testing::PosteriorObject({}), &empty).ok());
  EXPECT_TRUE(empty.empty());
}

TEST(PosteriorTest, ReadsTextAsWritePosteriorWritesIt) {
  Posterior post;
  ObjectFormat format;
  ASSERT_TRUE(Read("[ 3 0.75 12 0.25 ] [ ] [ 0 1 ] [ 7 0.5 7 0.5 2 1e-30 ] \n"
                   "rest",
                   &post, &format)
                  .ok());
  EXPECT_EQ(format, ObjectFormat::kTextPosterior);
  EXPECT_EQ(post, AsFloat(kPost));
  // Without the final newline, and with no frames at all.
  ASSERT_TRUE(Read("[ 1 1 ]", &post).ok());
  EXPECT_EQ(post, Posterior({{{1, 1.0f}}}));
  ASSERT_TRUE(Read("\nnext", &post).ok());
  EXPECT_TRUE(post.empty());
}

TEST(PosteriorTest, EveryPrefixOfABinaryObjectIsTruncated) {
  for (bool doubles : {false, true}) {
    const std::string object = testing::PosteriorObject(kPost, doubles);
    for (size_t n = 0; n < object.size(); ++n) {
      Posterior post;
      const absl::Status s = Read(object.substr(0, n), &post);
      EXPECT_EQ(BadDataReasonOf(s), BadDataReason::kTruncated)
          << "prefix " << n << " of " << object.size() << ": " << s;
    }
  }
  Posterior post;
  EXPECT_EQ(BadDataReasonOf(Read("[ 1 1 ", &post)), BadDataReason::kTruncated);
  EXPECT_EQ(BadDataReasonOf(Read("[ 1 1\n", &post)),
            BadDataReason::kTruncated);
}

TEST(PosteriorTest, MalformedObjectsAreRefusedWithTheirReason) {
  using testing::Bytes;
  const std::string header = testing::BinaryHeader();
  struct Case {
    std::string data;
    BadDataReason reason;
  };
  const std::vector<Case> cases = {
      {Bytes().Raw(header).KaldiInt32(-1).str(),
       BadDataReason::kMalformedObject},
      {Bytes().Raw(header).KaldiInt32(1).KaldiInt32(-2).str(),
       BadDataReason::kMalformedObject},
      // A weight of size 2.
      {Bytes().Raw(header).KaldiInt32(1).KaldiInt32(1).KaldiInt32(5).U8(2)
           .U16(0).U32(0).U32(0).str(),
       BadDataReason::kMalformedObject},
      // An id with size byte 8.
      {Bytes().Raw(header).KaldiInt32(1).KaldiInt32(1).U8(8).I32(5).I32(0)
           .U8(4).F32(1).str(),
       BadDataReason::kMalformedObject},
      {testing::FmObject(1, 1, {1}), BadDataReason::kUnknownToken},
      {"[ 1 ] \n", BadDataReason::kMalformedObject},  // no weight
      {"[ x 1 ] \n", BadDataReason::kMalformedObject},
      {"[ 1 y ] \n", BadDataReason::kMalformedObject},
      {"1 1 \n", BadDataReason::kMalformedObject},  // no "["
      {"[ [ 1 1 ] \n", BadDataReason::kMalformedObject},
      {"] \n", BadDataReason::kMalformedObject},
  };
  for (const Case& c : cases) {
    Posterior post;
    const absl::Status s = Read(c.data, &post);
    EXPECT_EQ(BadDataReasonOf(s), c.reason)
        << testing::Bytes().Raw(c.data).str().size() << " bytes: " << s;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
}

TEST(PosteriorTest, LimitsBoundFramesAndPairsBeforeTheyAreRead) {
  ReadLimits limits;
  limits.max_elements = 4;
  Posterior post;
  // 4 pairs in all pass; 5 do not, in binary and in text.
  EXPECT_TRUE(Read(testing::PosteriorObject(
                       {{{1, 1}, {2, 1}}, {{3, 1}, {4, 1}}}),
                   &post, nullptr, limits)
                  .ok());
  EXPECT_EQ(BadDataReasonOf(Read(testing::PosteriorObject(kPost), &post,
                                 nullptr, limits)),
            BadDataReason::kTooLarge);
  EXPECT_EQ(BadDataReasonOf(Read("[ 1 1 2 1 3 1 ] [ 4 1 5 1 ]\n", &post,
                                 nullptr, limits)),
            BadDataReason::kTooLarge);
  // A claim of 2^30 frames in a few bytes: too large, nothing allocated.
  EXPECT_EQ(BadDataReasonOf(Read(testing::Bytes()
                                     .Raw(testing::BinaryHeader())
                                     .KaldiInt32(1 << 30)
                                     .str(),
                                 &post)),
            BadDataReason::kTooLarge);
  // Within the limit but past the data: truncated before any frame.
  EXPECT_EQ(BadDataReasonOf(Read(testing::Bytes()
                                     .Raw(testing::BinaryHeader())
                                     .KaldiInt32(1000)
                                     .str(),
                                 &post)),
            BadDataReason::kTruncated);
}

class PosteriorFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir(::testing::TempDir(), "posteriors");
  }
  std::string dir_;
};

TEST_F(PosteriorFilesTest, WrittenPosteriorsReadBackThroughAFileList) {
  ArchiveWriterOptions w;
  w.ark_path = dir_ + "/post.1.ark";
  auto writer = ArchiveWriter::Create(w);
  ASSERT_TRUE(writer.ok());
  const Posterior first = AsFloat(kPost);
  const Posterior second = {{{5, -2.5f}}, {{6, 0.125f}, {1, 3.0f}}};
  ASSERT_TRUE((*writer)->WritePosterior("u1", first).ok());
  ASSERT_TRUE((*writer)->WritePosterior("u2", second).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  // A second file, binary from the independent writer, truncated in u4; a
  // third in text.
  testing::TestArchive b;
  b.Add("u3", testing::PosteriorObject({{{9, 1.0}}}));
  b.Add("u4", testing::PosteriorObject(kPost));
  testing::WriteFile(dir_ + "/post.2.ark",
                     b.bytes().substr(0, b.bytes().size() - 3));
  testing::WriteFile(dir_ + "/post.3.txt", "u5 [ 4 1 ] [ 4 0.5 8 0.5 ] \n");

  auto files = ExpandFileList(dir_ + "/post.*");
  ASSERT_TRUE(files.ok());
  auto reader = PosteriorReader::Open(*files);
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> keys;
  std::vector<Posterior> posts;
  PosteriorEntry e;
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
    posts.push_back(e.post);
  }
  EXPECT_EQ(errors, 1);
  EXPECT_EQ((*reader)->files_cut_short(), 1);
  ASSERT_EQ(keys, std::vector<std::string>({"u1", "u2", "u3", "u5"}));
  EXPECT_EQ(posts[0], first);
  EXPECT_EQ(posts[1], second);
  EXPECT_EQ(posts[3], Posterior({{{4, 1.0f}}, {{4, 0.5f}, {8, 0.5f}}}));
  EXPECT_EQ(e.file_index, 2);
  EXPECT_EQ(PosteriorReader::Open({}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd::kaldi
