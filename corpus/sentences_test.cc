#include "corpus/sentences.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace asgd::corpus {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(ExtractClausesTest, SplitsOnPunctuationAndKeepsLetterClauses) {
  EXPECT_THAT(
      ExtractClauses("You may copy it. But you must not sell it, unless "
                     "the licensee's terms allow non-free use; see section "
                     "2 below! Is this \"really\" fine? (yes it is)"),
      ElementsAre("You may copy it", "But you must not sell it",
                  "unless the licensee's terms allow non-free use",
                  "yes it is"));
}

TEST(ExtractClausesTest, DropsClausesWithNonWords) {
  // Digits, URLs, stray symbols and edge hyphens disqualify a clause.
  EXPECT_THAT(ExtractClauses("see section 2 below. mail me at x@y dot org. "
                             "a -- b c. trailing- hyphen here"),
              IsEmpty());
}

TEST(ExtractClausesTest, KeepsThreeToTwentyWords) {
  EXPECT_THAT(ExtractClauses("one two. one two three."),
              ElementsAre("one two three"));
  std::string twenty, twenty_one;
  for (int i = 0; i < 20; ++i) twenty += "word ";
  twenty_one = twenty + "word";
  EXPECT_EQ(ExtractClauses(twenty).size(), 1u);
  EXPECT_THAT(ExtractClauses(twenty_one), IsEmpty());
}

TEST(ExtractClausesTest, NormalisesWhitespaceAndQuotes) {
  EXPECT_THAT(ExtractClauses("  the\n\t`Program'   means\r\nthis  "),
              ElementsAre("the Program means this"));
}

class LoadClausesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/sentences_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string dir_;
};

TEST_F(LoadClausesTest, ReadsFilesInNameOrderAndDeduplicates) {
  Write("b.txt", "Second file clause here. THE FIRST CLAUSE.");
  Write("a.txt", "The first clause. Another one here. the first clause.");
  ASSERT_EQ(symlink("a.txt", (dir_ + "/c-link").c_str()), 0);
  ASSERT_EQ(mkdir((dir_ + "/subdir").c_str(), 0755), 0);
  absl::StatusOr<std::vector<std::string>> clauses = LoadClauses(dir_);
  ASSERT_TRUE(clauses.ok()) << clauses.status();
  EXPECT_THAT(*clauses, ElementsAre("The first clause", "Another one here",
                                    "Second file clause here"));
}

TEST_F(LoadClausesTest, MissingDirectoryIsNotFound) {
  EXPECT_EQ(LoadClauses(dir_ + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(LoadClausesTest, NoClauseIsInvalidArgument) {
  Write("a.txt", "1 2 3. x.");
  EXPECT_EQ(LoadClauses(dir_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LoadClausesDebianTest, CommonLicensesGiveEnoughSentences) {
  const std::string dir = "/usr/share/common-licenses";
  // Every Debian system has it, and the corpus generator depends on it.
  ASSERT_EQ(access(dir.c_str(), R_OK), 0) << dir << " is absent";
  absl::StatusOr<std::vector<std::string>> clauses = LoadClauses(dir);
  ASSERT_TRUE(clauses.ok()) << clauses.status();
  EXPECT_GT(clauses->size(), 1500u);
}

}  // namespace
}  // namespace asgd::corpus
