// Untrusted text (names from the network, lines of a file) in error messages:
// escaped so that control bytes and binary garbage print as \x.. sequences,
// and truncated so that a 100 KB name cannot turn into a 100 KB message (gRPC
// sends the message in a header, which peers limit to a few KB).
//
//   absl::StrCat("unknown tensor '", EscapeForMessage(name), "'")
//   // unknown tensor 'layer9/weight'
//   // unknown tensor 'xxxxxxxx...' (first 64 bytes of 102400, escaped)
//
// Thread-safety: pure.
#ifndef ASGD_COMMON_TEXT_QUOTE_H_
#define ASGD_COMMON_TEXT_QUOTE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace asgd {

// Longest prefix of untrusted text that goes into a message by default.
inline constexpr size_t kMaxQuotedBytes = 64;

// `text` C-escaped (non-printable bytes as \xNN, quotes and backslashes
// escaped). When it is longer than `max_bytes`, only its first `max_bytes`
// bytes, followed by "...(N bytes)".
std::string EscapeForMessage(absl::string_view text,
                             size_t max_bytes = kMaxQuotedBytes);

}  // namespace asgd

#endif  // ASGD_COMMON_TEXT_QUOTE_H_
