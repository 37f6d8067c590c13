#include "corpus/sentences.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace asgd::corpus {
namespace {

// A word is letters, optionally joined by single inner '-' or '\''.
bool IsWord(absl::string_view word) {
  if (word.empty()) return false;
  bool previous_was_letter = false;
  for (char c : word) {
    if (absl::ascii_isalpha(static_cast<unsigned char>(c))) {
      previous_was_letter = true;
    } else if ((c == '-' || c == '\'') && previous_was_letter) {
      previous_was_letter = false;
    } else {
      return false;
    }
  }
  return previous_was_letter;
}

absl::string_view StripQuotes(absl::string_view word) {
  while (!word.empty() && (word.front() == '\'' || word.front() == '`')) {
    word.remove_prefix(1);
  }
  while (!word.empty() && (word.back() == '\'' || word.back() == '`')) {
    word.remove_suffix(1);
  }
  return word;
}

}  // namespace

std::vector<std::string> ExtractClauses(absl::string_view text) {
  std::vector<std::string> clauses;
  for (absl::string_view clause :
       absl::StrSplit(text, absl::ByAnyChar(".!?;:,()[]\""))) {
    std::vector<absl::string_view> words;
    bool ok = true;
    for (absl::string_view word : absl::StrSplit(
             clause, absl::ByAnyChar(" \t\r\n\f\v"), absl::SkipEmpty())) {
      word = StripQuotes(word);
      if (!IsWord(word)) {
        ok = false;
        break;
      }
      words.push_back(word);
    }
    if (ok && words.size() >= kMinClauseWords &&
        words.size() <= kMaxClauseWords) {
      clauses.push_back(absl::StrJoin(words, " "));
    }
  }
  return clauses;
}

absl::StatusOr<std::vector<std::string>> LoadClauses(const std::string& dir) {
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot list text directory ", dir,
                                            ": ", std::strerror(errno)));
  }
  std::vector<std::string> names;
  while (const dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat info;
    const std::string path = absl::StrCat(dir, "/", name);
    if (lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode)) {
      names.push_back(name);
    }
  }
  closedir(handle);
  std::sort(names.begin(), names.end());

  std::vector<std::string> clauses;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(dir, "/", name);
    std::ifstream file(path, std::ios::binary);
    std::stringstream contents;
    contents << file.rdbuf();
    if (!file) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read text file ", path));
    }
    for (std::string& clause : ExtractClauses(contents.str())) {
      if (seen.insert(absl::AsciiStrToLower(clause)).second) {
        clauses.push_back(std::move(clause));
      }
    }
  }
  if (clauses.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no usable clause in the files of ", dir));
  }
  return clauses;
}

}  // namespace asgd::corpus
