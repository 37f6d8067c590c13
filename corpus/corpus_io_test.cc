#include "corpus/corpus_io.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace asgd::corpus {
namespace {

using ::testing::HasSubstr;

constexpr int kDim = 3;
constexpr int kClasses = 4;

std::string MakeTempDir() {
  std::string pattern = testing::TempDir() + "/corpus_io_test.XXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

std::vector<Utterance> TwoUtterances() {
  Utterance a;
  a.voice = 2;
  a.num_frames = 2;
  a.features = {0.5f, -1.0f, 2.0f, 3.25f, 0.0f, -7.5f};
  a.labels = {0, 3};
  Utterance b;
  b.voice = 0;
  b.num_frames = 1;
  b.features = {1.0f, 2.0f, 3.0f};
  b.labels = {1};
  return {a, b};
}

// A valid corpus with one train and one heldout part.
class CorpusIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_TRUE(
        WriteUtteranceFile(Path("train-00.bin"), kDim, TwoUtterances()).ok());
    ASSERT_TRUE(
        WriteUtteranceFile(Path("heldout-00.bin"), kDim, {TwoUtterances()[1]})
            .ok());
    WriteFile(Path("corpus.txt"), kMetadata);
  }

  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_, "/", name);
  }

  // Rewrites corpus.txt with `from` replaced by `to` and loads the corpus.
  absl::Status LoadWithMetadata(const std::string& from,
                                const std::string& to) {
    const std::string edited = absl::StrReplaceAll(kMetadata, {{from, to}});
    EXPECT_NE(edited, kMetadata) << "test edit did not apply: " << from;
    WriteFile(Path("corpus.txt"), edited);
    return LoadCorpus(dir_).status();
  }

  // Rewrites train-00.bin through `edit` and reads it.
  template <typename Edit>
  absl::Status ReadEdited(Edit edit) {
    std::string data = ReadFile(Path("train-00.bin"));
    edit(data);
    WriteFile(Path("train-00.bin"), data);
    return ReadUtteranceFile(Path("train-00.bin"), kDim, kClasses).status();
  }

  static constexpr char kMetadata[] =
      "format asgd-corpus-1\n"
      "feature_dim 3\n"
      "num_classes 4\n"
      "classes a b c pau\n"
      "mean 0.5 -0.25 1\n"
      "stddev 1 2 0.5\n"
      "seed 7\n"
      "train_files train-00.bin\n"
      "heldout_files heldout-00.bin\n";

  std::string dir_;
};

// Byte offsets in train-00.bin.
constexpr size_t kFirstUtterance = 16;
constexpr size_t kFirstLabels = kFirstUtterance + 8 + 2 * kDim * 4;

void PutU32(std::string& data, size_t offset, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    data[offset + i] = static_cast<char>(value >> (8 * i));
}

void ExpectInvalid(const absl::Status& status, const std::string& file,
                   const std::string& problem) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(file));
  EXPECT_THAT(status.message(), HasSubstr(problem));
}

TEST_F(CorpusIoTest, RoundTrip) {
  absl::StatusOr<std::vector<Utterance>> read =
      ReadUtteranceFile(Path("train-00.bin"), kDim, kClasses);
  ASSERT_TRUE(read.ok()) << read.status();
  const std::vector<Utterance> expected = TwoUtterances();
  ASSERT_EQ(read->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*read)[i].voice, expected[i].voice);
    EXPECT_EQ((*read)[i].num_frames, expected[i].num_frames);
    EXPECT_EQ((*read)[i].features, expected[i].features);
    EXPECT_EQ((*read)[i].labels, expected[i].labels);
  }
}

TEST_F(CorpusIoTest, FileLayoutIsLittleEndianAsDocumented) {
  const std::string data = ReadFile(Path("train-00.bin"));
  ASSERT_EQ(data.size(), 16 + (8 + 2 * (kDim * 4 + 4)) + (8 + kDim * 4 + 4));
  EXPECT_EQ(data.substr(0, 8), "ASGDUTT1");
  EXPECT_EQ(data.substr(8, 8), std::string("\x03\0\0\0\x02\0\0\0", 8));
  EXPECT_EQ(data.substr(16, 8), std::string("\x02\0\0\0\x02\0\0\0", 8));
  // Labels 0 and 3 after six floats.
  EXPECT_EQ(data.substr(kFirstLabels, 8), std::string("\0\0\0\0\x03\0\0\0", 8));
}

TEST_F(CorpusIoTest, EmptyFileRoundTrips) {
  ASSERT_TRUE(WriteUtteranceFile(Path("empty.bin"), kDim, {}).ok());
  absl::StatusOr<std::vector<Utterance>> read =
      ReadUtteranceFile(Path("empty.bin"), kDim, kClasses);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->empty());
}

TEST_F(CorpusIoTest, WriteRejectsInconsistentUtterances) {
  std::vector<Utterance> utterances = TwoUtterances();
  utterances[1].labels.push_back(0);
  const absl::Status status =
      WriteUtteranceFile(Path("bad.bin"), kDim, utterances);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("utterance 1"));
  EXPECT_EQ(WriteUtteranceFile(Path("bad.bin"), 0, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::fopen(Path("bad.bin").c_str(), "rb"), nullptr);
}

TEST_F(CorpusIoTest, WriteToMissingDirectoryFails) {
  EXPECT_FALSE(
      WriteUtteranceFile(Path("no/such/dir.bin"), kDim, TwoUtterances()).ok());
}

TEST_F(CorpusIoTest, ReadMissingFileIsNotFound) {
  EXPECT_EQ(
      ReadUtteranceFile(Path("missing.bin"), kDim, kClasses).status().code(),
      absl::StatusCode::kNotFound);
}

TEST_F(CorpusIoTest, BadMagic) {
  ExpectInvalid(ReadEdited([](std::string& d) { d[3] = 'X'; }), "train-00.bin",
                "bad magic");
}

TEST_F(CorpusIoTest, TruncatedHeader) {
  ExpectInvalid(ReadEdited([](std::string& d) { d.resize(10); }),
                "train-00.bin", "truncated");
}

TEST_F(CorpusIoTest, TruncatedBody) {
  ExpectInvalid(ReadEdited([](std::string& d) { d.resize(d.size() - 1); }),
                "train-00.bin", "truncated in utterance 1");
}

TEST_F(CorpusIoTest, TruncatedBetweenUtterances) {
  ExpectInvalid(
      ReadEdited([](std::string& d) { d.resize(kFirstLabels + 8 + 4); }),
      "train-00.bin", "truncated in utterance 1");
}

TEST_F(CorpusIoTest, AbsurdUtteranceCount) {
  ExpectInvalid(ReadEdited([](std::string& d) { PutU32(d, 12, 0xffffffffu); }),
                "train-00.bin", "truncated");
}

TEST_F(CorpusIoTest, AbsurdFrameCount) {
  ExpectInvalid(ReadEdited([](std::string& d) {
                  PutU32(d, kFirstUtterance, 0x7fffffffu);
                }),
                "train-00.bin", "truncated in utterance 0");
}

TEST_F(CorpusIoTest, TrailingBytes) {
  ExpectInvalid(ReadEdited([](std::string& d) { d += "xx"; }), "train-00.bin",
                "2 trailing bytes");
}

TEST_F(CorpusIoTest, DimMismatch) {
  const absl::Status status =
      ReadUtteranceFile(Path("train-00.bin"), kDim + 1, kClasses).status();
  ExpectInvalid(status, "train-00.bin", "feature_dim mismatch: file has 3");
}

TEST_F(CorpusIoTest, LabelOutOfRange) {
  ExpectInvalid(
      ReadEdited([](std::string& d) { PutU32(d, kFirstLabels + 4, 4); }),
      "train-00.bin", "utterance 0, frame 1: label 4 out of range [0, 4)");
}

TEST_F(CorpusIoTest, NegativeLabel) {
  ExpectInvalid(
      ReadEdited([](std::string& d) { PutU32(d, kFirstLabels, 0xffffffffu); }),
      "train-00.bin", "label -1 out of range");
}

TEST_F(CorpusIoTest, NonFiniteFeature) {
  const absl::Status s = ReadEdited([](std::string& d) {
    PutU32(d, kFirstUtterance + 8, 0x7fc00000u);  // NaN
  });
  ExpectInvalid(s, "train-00.bin at byte 16 (utterance #0)",
                "feature row 0, column 0 as stored is nan");
  EXPECT_EQ(kaldi::BadDataReasonOf(s), kaldi::BadDataReason::kNonFinite);
}

// Bytes of 0x7e in an utterance's features: finite floats of about 8.4e37,
// far beyond the bound. Refused naming the file, the utterance's
// byte offset and index, the row and the column; or skipped and counted.
TEST_F(CorpusIoTest, GarbageFeaturesBeyondTheBoundAreBadData) {
  // 0x7e over the first utterance's second frame (its 12 feature bytes).
  std::string garbage = ReadFile(Path("train-00.bin"));
  for (size_t k = kFirstUtterance + 8 + 3 * 4; k < kFirstLabels; ++k) {
    garbage[k] = 0x7e;
  }
  WriteFile(Path("train-00.bin"), garbage);
  absl::Status s = LoadCorpus(dir_).status();
  ExpectInvalid(s, Path("train-00.bin") + " at byte 16 (utterance #0)",
                "feature_magnitude: feature row 1, column 0 as stored is 8.");
  EXPECT_EQ(kaldi::BadDataReasonOf(s), kaldi::BadDataReason::kFeatureMagnitude);

  std::vector<absl::Status> skipped;
  CorpusReadOptions o;
  o.policy = kaldi::BadDataPolicy::kSkip;
  o.on_skip = [&](const absl::Status& e) { skipped.push_back(e); };
  absl::StatusOr<Corpus> corpus = LoadCorpus(dir_, o);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->train.size(), 1u);
  EXPECT_EQ(corpus->train[0].features, TwoUtterances()[1].features);
  EXPECT_EQ(corpus->train_frames, 1);
  EXPECT_EQ(corpus->bad.Get(kaldi::BadDataReason::kFeatureMagnitude), 1);
  EXPECT_EQ(corpus->bad.Total(), 1);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(kaldi::BadDataReasonOf(skipped[0]),
            kaldi::BadDataReason::kFeatureMagnitude);

  // The bound is an option (+inf: none, for finite values).
  o.policy = kaldi::BadDataPolicy::kRefuse;
  o.max_feature_magnitude = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(LoadCorpus(dir_, o).ok());
  o.max_feature_magnitude = 0;
  EXPECT_EQ(LoadCorpus(dir_, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Features that are fine as stored but not once normalised: a stddev of
// 1e-5 in corpus.txt scales them by 1e5.
TEST_F(CorpusIoTest, FeaturesBeyondTheBoundOnceNormalisedAreBadData) {
  const absl::Status s = LoadWithMetadata("stddev 1 2 0.5", "stddev 1 2 1e-5");
  ExpectInvalid(s, Path("train-00.bin") + " at byte 16 (utterance #0)",
                "column 2 after the corpus's normalisation");
  EXPECT_EQ(kaldi::BadDataReasonOf(s), kaldi::BadDataReason::kFeatureMagnitude);
  CorpusReadOptions o;
  o.policy = kaldi::BadDataPolicy::kSkip;
  absl::StatusOr<Corpus> corpus = LoadCorpus(dir_, o);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_TRUE(corpus->train.empty());  // both utterances
  EXPECT_TRUE(corpus->heldout.empty());
  EXPECT_EQ(corpus->bad.Get(kaldi::BadDataReason::kFeatureMagnitude), 3);
}

TEST_F(CorpusIoTest, LoadCorpus) {
  absl::StatusOr<Corpus> corpus = LoadCorpus(dir_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->info.feature_dim, kDim);
  EXPECT_EQ(corpus->info.num_classes, kClasses);
  EXPECT_THAT(corpus->info.class_names,
              ::testing::ElementsAre("a", "b", "c", "pau"));
  EXPECT_THAT(corpus->info.mean, ::testing::ElementsAre(0.5f, -0.25f, 1.0f));
  EXPECT_THAT(corpus->info.stddev, ::testing::ElementsAre(1.0f, 2.0f, 0.5f));
  EXPECT_EQ(corpus->info.seed, 7u);
  EXPECT_EQ(corpus->train.size(), 2u);
  EXPECT_EQ(corpus->heldout.size(), 1u);
  EXPECT_EQ(corpus->train_frames, 3);
  EXPECT_EQ(corpus->heldout_frames, 1);
  EXPECT_EQ(corpus->train[0].labels, TwoUtterances()[0].labels);
}

TEST_F(CorpusIoTest, MissingDirectoryIsNotFound) {
  EXPECT_EQ(LoadCorpus(Path("nonexistent")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CorpusIoTest, MalformedMetadata) {
  struct Case {
    std::string from, to, problem;
  };
  const Case cases[] = {
      {"format asgd-corpus-1", "format asgd-corpus-2",
       "format is \"asgd-corpus-2\""},
      {"seed 7\n", "", "missing key \"seed\""},
      {"feature_dim 3", "feature_dim three", "positive integer"},
      {"feature_dim 3", "feature_dim 0", "positive integer"},
      {"feature_dim 3", "feature_dim 3 4", "needs 1 value, has 2"},
      {"classes a b c pau", "classes a b c", "lists 3 names"},
      {"mean 0.5 -0.25 1", "mean 0.5 -0.25", "\"mean\" needs 3 values, has 2"},
      {"mean 0.5 -0.25 1", "mean 0.5 x 1", "\"mean\" value 1"},
      {"stddev 1 2 0.5", "stddev 1 0 0.5", "\"stddev\" value 1"},
      {"stddev 1 2 0.5", "stddev 1 nan 0.5", "\"stddev\" value 1"},
      {"seed 7", "seed -7", "not an unsigned integer"},
      {"seed 7\n", "seed 7\nseed 8\n", "duplicate key \"seed\""},
      {"seed 7\n", "seed 7\ncolour blue\n", "unknown key \"colour\""},
      {"train_files train-00.bin", "train_files", "lists no file"},
      {"train_files train-00.bin", "train_files ../train-00.bin",
       "not a plain file name"},
      {"train_files train-00.bin", "train_files train-01.bin",
       "lists \"train-01.bin\", which is missing"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    ExpectInvalid(LoadWithMetadata(c.from, c.to), "corpus.txt", c.problem);
  }
}

// A corpus.txt of binary garbage: the error names what is wrong with the
// bytes escaped and cut short, never raw binary or a whole line.
TEST_F(CorpusIoTest, GarbageMetadataIsEscapedAndShortInTheError) {
  std::string garbage(4096, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) {
    garbage[i] = static_cast<char>((i * 131 + 7) % 256);
  }
  garbage[0] = 'x';  // a first word, then binary
  for (char& c : garbage) {
    if (c == '\n' || c == ' ' || c == '\t') c = 'y';
  }
  WriteFile(Path("corpus.txt"), garbage);
  const absl::Status s = LoadCorpus(dir_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(s.message().size(), 512u) << s.message().size();
  for (char c : s.message()) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << static_cast<int>(c);
  }
  EXPECT_THAT(std::string(s.message()), HasSubstr("4096 bytes"));
}

TEST_F(CorpusIoTest, CorpusDimMismatchNamesThePart) {
  // corpus.txt says 2 dims; the parts have 3.
  ExpectInvalid(LoadWithMetadata("feature_dim 3\nnum_classes 4\n"
                                 "classes a b c pau\n"
                                 "mean 0.5 -0.25 1\nstddev 1 2 0.5\n",
                                 "feature_dim 2\nnum_classes 4\n"
                                 "classes a b c pau\n"
                                 "mean 0.5 -0.25\nstddev 1 2\n"),
                "train-00.bin", "feature_dim mismatch");
}

TEST_F(CorpusIoTest, CorpusLabelOutOfRangeNamesThePart) {
  // Two classes: the train part's label 3 is out of range.
  const absl::Status status = LoadWithMetadata(
      "num_classes 4\nclasses a b c pau", "num_classes 2\nclasses a pau");
  ExpectInvalid(status, "train-00.bin", "label 3 out of range [0, 2)");
}

TEST_F(CorpusIoTest, TruncatedPartFailsLoad) {
  std::string data = ReadFile(Path("heldout-00.bin"));
  data.resize(data.size() - 4);
  WriteFile(Path("heldout-00.bin"), data);
  ExpectInvalid(LoadCorpus(dir_).status(), "heldout-00.bin", "truncated");
}

// corpus.txt or a part that is a FIFO (reading it would wait for a writer
// for good), or a device: refused at once, naming the path.
TEST_F(CorpusIoTest, NonRegularFilesAreRefusedWithoutBlocking) {
  ASSERT_EQ(std::remove(Path("heldout-00.bin").c_str()), 0);
  ASSERT_EQ(::mkfifo(Path("heldout-00.bin").c_str(), 0600), 0);
  ExpectInvalid(LoadCorpus(dir_).status(), Path("heldout-00.bin"),
                "not a regular file (a FIFO)");
  ASSERT_EQ(std::remove(Path("corpus.txt").c_str()), 0);
  ASSERT_EQ(::mkfifo(Path("corpus.txt").c_str(), 0600), 0);
  ExpectInvalid(LoadCorpus(dir_).status(), Path("corpus.txt"),
                "not a regular file (a FIFO)");
  ExpectInvalid(ReadUtteranceFile("/dev/zero", kDim, kClasses).status(),
                "/dev/zero", "not a regular file (a character device)");
}

}  // namespace
}  // namespace asgd::corpus
