#include "corpus/generator.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "corpus/corpus_io.h"
#include "corpus/phone_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace asgd::corpus {
namespace {

using ::testing::HasSubstr;

std::string MakeTempDir(const std::string& name) {
  std::string pattern = absl::StrCat(testing::TempDir(), "/", name, ".XXXXXX");
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool Exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

// File name -> contents for every file in `dir`.
std::vector<std::pair<std::string, std::string>> DirContents(
    const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  DIR* handle = opendir(dir.c_str());
  while (const dirent* entry = handle ? readdir(handle) : nullptr) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    files.emplace_back(name, ReadFile(dir + "/" + name));
  }
  if (handle) closedir(handle);
  std::sort(files.begin(), files.end());
  return files;
}

// The texts of a split, from its .txt parts: `<utt_id> <voice> <text>`.
std::vector<std::string> Texts(const std::string& dir,
                               const std::string& split) {
  std::vector<std::string> texts;
  for (const auto& [name, contents] : DirContents(dir)) {
    if (name.rfind(split + "-", 0) != 0 || name.size() < 4 ||
        name.substr(name.size() - 4) != ".txt") {
      continue;
    }
    for (absl::string_view line :
         absl::StrSplit(contents, '\n', absl::SkipEmpty())) {
      std::vector<std::string> fields =
          absl::StrSplit(line, absl::MaxSplits(' ', 2));
      EXPECT_EQ(fields.size(), 3u) << line;
      if (fields.size() == 3) texts.push_back(fields[2]);
    }
  }
  return texts;
}

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    text_dir_ = MakeTempDir("text");
    std::ofstream(text_dir_ + "/licence")
        << "You may copy the program. You may charge a fee for this. "
           "Keep intact all the notices. Give all recipients a copy. "
           "You must cause the modified files to carry notices. "
           "This license applies to the whole work. "
           "Nothing else grants you permission to modify it. "
           "The work is provided as is. There is no warranty for the program. "
           "Each version is given a number. You should have received a copy. "
           "Send us your changes, please.";
  }

  GeneratorOptions TinyOptions(const std::string& out_dir) const {
    GeneratorOptions options;
    options.out_dir = out_dir;
    options.num_train = 6;
    options.num_heldout = 2;
    options.jobs = 2;
    options.seed = 5;
    options.text_dir = text_dir_;
    return options;
  }

  std::string text_dir_;
};

TEST_F(GeneratorTest, TinyCorpusLoadsAndIsConsistent) {
  const std::string out = MakeTempDir("corpus");
  GenerationStats stats;
  ASSERT_TRUE(GenerateCorpus(TinyOptions(out), &stats).ok());
  EXPECT_EQ(stats.jobs, 2);
  EXPECT_EQ(stats.train_utterances, 6);
  EXPECT_EQ(stats.heldout_utterances, 2);

  absl::StatusOr<Corpus> corpus = LoadCorpus(out);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->info.feature_dim, 40);
  EXPECT_EQ(corpus->info.num_classes, kNumPhoneClasses);
  EXPECT_EQ(corpus->info.class_names.back(), "pau");
  EXPECT_EQ(corpus->info.seed, 5u);
  ASSERT_EQ(corpus->train.size(), 6u);
  ASSERT_EQ(corpus->heldout.size(), 2u);
  EXPECT_EQ(corpus->train_frames, stats.train_frames);
  EXPECT_EQ(corpus->heldout_frames, stats.heldout_frames);
  EXPECT_NEAR(stats.audio_hours,
              (stats.train_frames + stats.heldout_frames) / 360000.0, 1e-9);
  for (const Utterance& u : corpus->train) {
    EXPECT_GT(u.num_frames, 50);  // a clause is over half a second
    EXPECT_GE(u.voice, 0);
    EXPECT_LT(u.voice, 4);
    EXPECT_EQ(u.labels.front(), kSilenceClass);
    // Per-utterance mean normalisation.
    double sum = 0;
    for (int t = 0; t < u.num_frames; ++t) sum += u.features[t * 40];
    EXPECT_NEAR(sum / u.num_frames, 0.0, 1e-3);
  }
  for (float s : corpus->info.stddev) EXPECT_GT(s, 0.1f);

  // Held-out sentences are never trained on.
  const std::vector<std::string> train = Texts(out, "train");
  const std::vector<std::string> heldout = Texts(out, "heldout");
  EXPECT_EQ(train.size(), 6u);
  EXPECT_EQ(heldout.size(), 2u);
  for (const std::string& text : heldout) {
    EXPECT_EQ(std::count(train.begin(), train.end(), text), 0) << text;
  }
}

TEST_F(GeneratorTest, SameSeedGivesIdenticalFilesAndJobsDoNotMatter) {
  const std::string a = MakeTempDir("a");
  const std::string b = MakeTempDir("b");
  const std::string c = MakeTempDir("c");
  ASSERT_TRUE(GenerateCorpus(TinyOptions(a)).ok());
  ASSERT_TRUE(GenerateCorpus(TinyOptions(b)).ok());
  EXPECT_EQ(DirContents(a), DirContents(b));

  GeneratorOptions one_job = TinyOptions(c);
  one_job.jobs = 1;
  ASSERT_TRUE(GenerateCorpus(one_job).ok());
  absl::StatusOr<Corpus> two = LoadCorpus(a);
  absl::StatusOr<Corpus> one = LoadCorpus(c);
  ASSERT_TRUE(two.ok() && one.ok());
  EXPECT_EQ(ReadFile(a + "/corpus.txt").substr(0, 300),
            ReadFile(c + "/corpus.txt").substr(0, 300));
  EXPECT_EQ(one->info.mean, two->info.mean);
  EXPECT_EQ(one->info.stddev, two->info.stddev);
  ASSERT_EQ(one->train.size(), two->train.size());
  for (size_t i = 0; i < one->train.size(); ++i) {
    EXPECT_EQ(one->train[i].features, two->train[i].features);
    EXPECT_EQ(one->train[i].labels, two->train[i].labels);
  }
}

TEST_F(GeneratorTest, HeldOutSetDoesNotDependOnSeed) {
  const std::string a = MakeTempDir("seed5");
  const std::string b = MakeTempDir("seed6");
  GeneratorOptions other_seed = TinyOptions(b);
  other_seed.seed = 6;
  other_seed.add_noise = false;
  ASSERT_TRUE(GenerateCorpus(TinyOptions(a)).ok());
  ASSERT_TRUE(GenerateCorpus(other_seed).ok());
  EXPECT_EQ(Texts(a, "heldout"), Texts(b, "heldout"));
  EXPECT_NE(ReadFile(a + "/train-00.bin"), ReadFile(b + "/train-00.bin"));
}

TEST_F(GeneratorTest, BadOptionsAreInvalidArgument) {
  const std::string out = MakeTempDir("bad");
  GeneratorOptions unknown_voice = TinyOptions(out);
  unknown_voice.voices = {"kal16", "kal"};
  const absl::Status status = GenerateCorpus(unknown_voice);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("unknown voice \"kal\""));

  GeneratorOptions too_many_heldout = TinyOptions(out);
  too_many_heldout.num_heldout = 100;
  EXPECT_EQ(GenerateCorpus(too_many_heldout).code(),
            absl::StatusCode::kInvalidArgument);

  GeneratorOptions speeds = TinyOptions(out);
  speeds.speed_min = 1.2f;
  speeds.speed_max = 0.9f;
  EXPECT_EQ(GenerateCorpus(speeds).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Exists(out + "/corpus.txt"));
}

TEST_F(GeneratorTest, UnusableOutputDirectoryFails) {
  GeneratorOptions options = TinyOptions("/proc/version/corpus");
  const absl::Status status = GenerateCorpus(options);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("/proc/version"));
}

TEST_F(GeneratorTest, FailedJobIsReportedAndLeavesNoCorpusTxt) {
  const std::string out = MakeTempDir("failing");
  ASSERT_TRUE(GenerateCorpus(TinyOptions(out)).ok());
  ASSERT_TRUE(Exists(out + "/corpus.txt"));
  // Job 1 cannot write its part: a directory blocks its temporary file.
  ASSERT_EQ(mkdir((out + "/train-01.bin.tmp").c_str(), 0755), 0);
  const absl::Status status = GenerateCorpus(TinyOptions(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("job 1 failed (exit status 1)"));
  EXPECT_THAT(status.message(), HasSubstr("train-01.bin.tmp"));
  EXPECT_FALSE(Exists(out + "/corpus.txt"));
}

}  // namespace
}  // namespace asgd::corpus
