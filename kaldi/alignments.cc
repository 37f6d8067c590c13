#include "kaldi/alignments.h"

#include <glob.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace asgd::kaldi {

absl::StatusOr<std::vector<std::string>> ExpandFileList(
    absl::string_view spec) {
  std::vector<std::string> files;
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) continue;
    const std::string pattern(item);
    if (pattern.find_first_of("*?[") == std::string::npos) {
      files.push_back(pattern);
      continue;
    }
    glob_t g;
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      globfree(&g);
      return absl::NotFoundError(
          absl::StrCat("\"", pattern, "\" matches no file"));
    }
    if (rc != 0) {
      globfree(&g);
      return absl::UnavailableError(
          absl::StrCat("cannot expand \"", pattern, "\""));
    }
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(matches.begin(), matches.end());
    files.insert(files.end(), matches.begin(), matches.end());
  }
  if (files.empty()) {
    return absl::InvalidArgumentError("the file list is empty");
  }
  return files;
}

absl::StatusOr<SequentialArchiveReader*> ArchiveListWalker::Next() {
  if (!failed_.ok()) return failed_;
  while (true) {
    if (ark_ == nullptr) {
      if (next_file_ >= static_cast<int>(files_.size())) return nullptr;
      current_file_ = next_file_++;
      auto opened =
          SequentialArchiveReader::Open(files_[current_file_], limits_);
      if (!opened.ok()) {
        failed_ = opened.status();
        return failed_;
      }
      ark_ = *std::move(opened);
    }
    absl::StatusOr<bool> more = ark_->Next();
    if (!more.ok()) return Finish(more.status());
    if (*more) return ark_.get();
    ark_.reset();  // end of this file
  }
}

absl::Status ArchiveListWalker::Finish(absl::Status read) {
  if (read.ok()) return read;
  ark_.reset();
  if (IsBadData(read)) {
    ++files_cut_short_;
  } else {
    failed_ = read;
  }
  return read;
}

absl::StatusOr<bool> ArchiveListWalker::NextEntry(
    std::string* key, DataLocation* where, int* file_index,
    const std::function<absl::Status(SequentialArchiveReader*)>& read) {
  key->clear();
  absl::StatusOr<SequentialArchiveReader*> ark = Next();
  *file_index = current_file_;
  if (!ark.ok()) return ark.status();
  if (*ark == nullptr) return false;
  *key = (*ark)->key();
  *where = {(*ark)->path(), (*ark)->object_offset(), 0, (*ark)->key()};
  absl::Status s = Finish(read(*ark));
  if (!s.ok()) return s;
  return true;
}

absl::StatusOr<std::unique_ptr<AlignmentReader>> AlignmentReader::Open(
    std::vector<std::string> files, const ReadLimits& limits) {
  if (files.empty()) {
    return absl::InvalidArgumentError("no alignment files");
  }
  return std::unique_ptr<AlignmentReader>(
      new AlignmentReader(std::move(files), limits));
}

absl::StatusOr<bool> AlignmentReader::Next(AlignmentEntry* entry) {
  entry->labels.clear();
  return walker_.NextEntry(
      &entry->key, &entry->where, &entry->file_index,
      [entry](SequentialArchiveReader* ark) {
        return ark->ReadInt32Vector(&entry->labels);
      });
}

absl::StatusOr<std::unique_ptr<PosteriorReader>> PosteriorReader::Open(
    std::vector<std::string> files, const ReadLimits& limits) {
  if (files.empty()) {
    return absl::InvalidArgumentError("no posterior files");
  }
  return std::unique_ptr<PosteriorReader>(
      new PosteriorReader(std::move(files), limits));
}

absl::StatusOr<bool> PosteriorReader::Next(PosteriorEntry* entry) {
  entry->post.clear();
  return walker_.NextEntry(&entry->key, &entry->where, &entry->file_index,
                           [entry](SequentialArchiveReader* ark) {
                             return ark->ReadPosterior(&entry->post);
                           });
}

}  // namespace asgd::kaldi
