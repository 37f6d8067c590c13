#include "common/pool_run_id.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace asgd {
namespace {

std::string WriteFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(PoolRunIdTest, AcceptsSixteenTo256Bytes) {
  EXPECT_TRUE(ValidatePoolRunId(std::string(16, 'a')).ok());
  EXPECT_TRUE(ValidatePoolRunId(std::string(256, '\0')).ok());
  EXPECT_EQ(ValidatePoolRunId("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePoolRunId(std::string(15, 'a')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePoolRunId(std::string(257, 'a')).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PoolRunIdTest, ReadsTheFileWithoutSurroundingWhitespace) {
  const std::string id = "0123456789abcdef0123456789abcdef";
  auto read = ReadPoolRunIdFile(WriteFile("id", "  " + id + "\n"), "--f");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, id);
}

TEST(PoolRunIdTest, BadFilesAreNamedAndTheIdIsNeverEchoed) {
  const std::string short_id = "secret-but-short";  // 16 bytes with the dash
  auto missing = ReadPoolRunIdFile("/nonexistent/run_id", "--f");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "/nonexistent/run_id"));
  auto too_short = ReadPoolRunIdFile(WriteFile("short", "qxzqj\n"), "--f");
  EXPECT_EQ(too_short.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(absl::StrContains(too_short.status().message(), "qxzqj"));
  auto too_long = ReadPoolRunIdFile(
      WriteFile("long", short_id + std::string(300, ' ') + "tail"), "--f");
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(absl::StrContains(too_long.status().message(), short_id));
  EXPECT_EQ(ReadPoolRunIdFile(WriteFile("empty", "\n"), "--f").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
