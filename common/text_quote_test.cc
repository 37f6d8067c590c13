#include "common/text_quote.h"

#include <string>

#include "gtest/gtest.h"

namespace asgd {
namespace {

TEST(TextQuoteTest, PlainTextIsUnchanged) {
  EXPECT_EQ(EscapeForMessage("layer0/weight"), "layer0/weight");
  EXPECT_EQ(EscapeForMessage(""), "");
}

TEST(TextQuoteTest, BinaryBytesAndQuotesAreEscaped) {
  const std::string garbage("a\x01\xff\"'\\\n", 7);
  EXPECT_EQ(EscapeForMessage(garbage), "a\\x01\\xff\\\"\\'\\\\\\n");
}

TEST(TextQuoteTest, LongTextIsTruncatedWithItsLength) {
  const std::string name(100 * 1024, 'x');
  const std::string quoted = EscapeForMessage(name);
  EXPECT_EQ(quoted, std::string(kMaxQuotedBytes, 'x') + "...(102400 bytes)");
  // Escaping can at most quadruple the kept prefix: messages stay short.
  EXPECT_LE(EscapeForMessage(std::string(100 * 1024, '\x80')).size(),
            4 * kMaxQuotedBytes + 32);
}

}  // namespace
}  // namespace asgd
