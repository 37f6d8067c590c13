// Frame-label alignments: int32-vector archives of zero-based pdf ids, one
// label per frame, as `ali-to-pdf` writes them (binary or text, gzip'd or
// not), spread over several files (ali.1.gz ... ali.N.gz).
//
// These must be pdf ids. The ali.*.gz of steps/align_*.sh hold transition
// ids; convert them first:
//   ali-to-pdf exp/tri3_ali/final.mdl
//     "ark:gunzip -c exp/tri3_ali/ali.*.gz|" ark:exp/tri3_ali/pdf.ark
//
//   ASGD_ASSIGN_OR_RETURN(std::vector<std::string> files,
//                         ExpandFileList("exp/tri3_ali/pdf.*.gz"));
//   ASGD_ASSIGN_OR_RETURN(auto reader, AlignmentReader::Open(files));
//   AlignmentEntry e;
//   while (true) {
//     absl::StatusOr<bool> more = reader->Next(&e);
//     if (!more.ok()) { ... IsBadData(): e.key / e.where say which;
//                       Next() goes on with the next file }
//     if (!*more) break;
//     ... e.key, e.labels
//   }
//
// PosteriorReader reads Posterior archives (per-frame lists of ids and
// weights, e.g. a lattice's pdfs: see below) over file lists the same way.
//
// Thread-safety: a reader is used by one thread.
#ifndef ASGD_KALDI_ALIGNMENTS_H_
#define ASGD_KALDI_ALIGNMENTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kaldi/archive_reader.h"
#include "kaldi/bad_data.h"
#include "kaldi/object_reader.h"

namespace asgd::kaldi {

// A comma-separated list of paths and glob patterns, e.g.
// "exp/tri3_ali/pdf.*.gz,extra/pdf.ark", in order; the matches of one
// pattern sorted. kNotFound when a pattern matches nothing, InvalidArgument
// for an empty list.
absl::StatusOr<std::vector<std::string>> ExpandFileList(absl::string_view spec);

// Walks the archives of a file list in order, one open at a time: the
// entries of AlignmentReader and PosteriorReader. A bad entry (a
// BadDataError) loses the rest of its file, which counts as cut short; the
// walk goes on with the next file. Any other error ends the walk.
class ArchiveListWalker {
 public:
  ArchiveListWalker(std::vector<std::string> files, const ReadLimits& limits)
      : files_(std::move(files)), limits_(limits) {}

  // The archive positioned at the next entry (its key read: read its object
  // once, then pass that read's status to Finish), or null after the last
  // file.
  absl::StatusOr<SequentialArchiveReader*> Next();
  // The status of reading the current entry's object, returned as is; a
  // failed read closes the file (see above).
  absl::Status Finish(absl::Status read);
  // Next, Finish and the entry's key, location and file index (the key is
  // kept on a bad object; the index also on an I/O error): the next entry's
  // object read by `read`; false after the last file.
  absl::StatusOr<bool> NextEntry(
      std::string* key, DataLocation* where, int* file_index,
      const std::function<absl::Status(SequentialArchiveReader*)>& read);

  const std::vector<std::string>& files() const { return files_; }
  // Index into files() of the file the last Next() read from.
  int current_file() const { return current_file_; }
  int files_cut_short() const { return files_cut_short_; }

 private:
  std::vector<std::string> files_;
  ReadLimits limits_;
  int next_file_ = 0;
  int current_file_ = -1;
  std::unique_ptr<SequentialArchiveReader> ark_;
  int files_cut_short_ = 0;
  absl::Status failed_;
};

struct AlignmentEntry {
  std::string key;
  std::vector<int32_t> labels;
  DataLocation where;  // archive and offset of the labels' object
  int file_index = 0;  // index into the reader's files
};

class AlignmentReader {
 public:
  // Opens nothing yet: files are opened one at a time as reading goes.
  static absl::StatusOr<std::unique_ptr<AlignmentReader>> Open(
      std::vector<std::string> files, const ReadLimits& limits = {});

  // The next alignment over all files; false after the last. A bad entry is
  // a BadDataError (e.key holds its key when it was read); the rest of that
  // file cannot be read (archives cannot resynchronise) and Next() goes on
  // with the next file. An I/O error (a file that cannot be opened) is
  // returned as is and ends the reader.
  absl::StatusOr<bool> Next(AlignmentEntry* entry);

  const std::vector<std::string>& files() const { return walker_.files(); }
  // Files whose tail was lost to an error.
  int files_cut_short() const { return walker_.files_cut_short(); }

 private:
  AlignmentReader(std::vector<std::string> files, const ReadLimits& limits)
      : walker_(std::move(files), limits) {}

  ArchiveListWalker walker_;
};

// Posterior archives (kaldi/matrix.h's Posterior), e.g. the per-frame pdf
// lists of a lattice:
//   lattice-to-post --acoustic-scale=0.1 "ark:gunzip -c lat.1.gz|" ark:- |
//     post-to-pdf-post final.mdl ark:- ark:post.1.ark
// or of an alignment (one pdf per frame, weight 1):
//   ali-to-pdf final.mdl "ark:gunzip -c ali.1.gz|" ark:- |
//     ali-to-post ark:- ark:post.1.ark
struct PosteriorEntry {
  std::string key;
  Posterior post;
  DataLocation where;  // archive and offset of the posterior's object
  int file_index = 0;  // index into the reader's files
};

// Reads them in order over a file list, with AlignmentReader's contract.
class PosteriorReader {
 public:
  static absl::StatusOr<std::unique_ptr<PosteriorReader>> Open(
      std::vector<std::string> files, const ReadLimits& limits = {});

  absl::StatusOr<bool> Next(PosteriorEntry* entry);

  const std::vector<std::string>& files() const { return walker_.files(); }
  int files_cut_short() const { return walker_.files_cut_short(); }

 private:
  PosteriorReader(std::vector<std::string> files, const ReadLimits& limits)
      : walker_(std::move(files), limits) {}

  ArchiveListWalker walker_;
};

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_ALIGNMENTS_H_
