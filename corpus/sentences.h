// The text the corpus generator reads aloud: short clauses taken from plain
// English text files (on Debian, the licence texts under
// /usr/share/common-licenses give about 1,800 of them).
//
// Thread-safety: the functions are reentrant.
#ifndef ASGD_CORPUS_SENTENCES_H_
#define ASGD_CORPUS_SENTENCES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace asgd::corpus {

inline constexpr int kMinClauseWords = 3;
inline constexpr int kMaxClauseWords = 20;

// Splits `text` into clauses at . ! ? ; : , ( ) [ ] and double quotes, and
// keeps, in order of appearance, each clause whose words (split on
// whitespace, surrounding single quotes and backquotes removed) are all made
// of ASCII letters, optionally joined by inner hyphens or apostrophes
// ("non-free", "licensee's"), and which has kMinClauseWords to kMaxClauseWords
// words. A kept clause is its words joined by single spaces.
std::vector<std::string> ExtractClauses(absl::string_view text);

// Reads the regular files directly in `dir` (symbolic links to them are
// skipped, as they repeat a file), in name order, and returns their clauses
// (ExtractClauses) with case-insensitive duplicates removed, first occurrence
// kept: a deterministic list for a given directory content. Returns NotFound
// when `dir` cannot be listed, InvalidArgument when a file cannot be read or
// no clause is found.
absl::StatusOr<std::vector<std::string>> LoadClauses(const std::string& dir);

}  // namespace asgd::corpus

#endif  // ASGD_CORPUS_SENTENCES_H_
