// Kaldi script files (feats.scp, cmvn.scp) and plain text tables (utt2spk,
// spk2utt, text): line readers with bounded memory, and the rxfilenames an
// scp line points at.
//
// An scp line is `key rxfilename`. The rxfilenames read here:
//   /path/raw_fbank.1.ark:1234         the object at byte 1234 of an archive
//                                      (just after "key ")
//   /path/foo.mat                      a file holding one object, no key
//   ...ark:1234[0:99]                  rows 0..99 (inclusive) of the matrix
//   ...ark:1234[0:99,0:12]             rows 0..99, columns 0..12
//   ...ark:1234[:,0:12]                all rows, columns 0..12
// Refused with kUnimplemented, naming the file and line: pipes ("cmd |"),
// stdin ("-") and output-style names ("| cmd"). A relative path is taken
// relative to ScpOptions::base_dir (Kaldi's convention: the directory the
// recipe runs in; default: the current directory).
//
// Example:
//   ASGD_ASSIGN_OR_RETURN(auto scp, ScpReader::Open("data/train/feats.scp"));
//   ScpEntry e;
//   while (true) {
//     absl::StatusOr<bool> more = scp->Next(&e);
//     if (!more.ok()) { ... a bad line: IsBadData(); Next() goes on after it }
//     if (!*more) break;
//     ... e.key, e.rx.path, e.rx.offset
//   }
//
// Thread-safety: readers are used by one thread; the functions are
// reentrant.
#ifndef ASGD_KALDI_SCP_H_
#define ASGD_KALDI_SCP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kaldi/bad_data.h"
#include "kaldi/input_stream.h"
#include "kaldi/matrix.h"

namespace asgd::kaldi {

// Inclusive row and column ranges; *_last == -1: up to the end.
struct MatrixRange {
  int32_t row_begin = 0;
  int32_t row_last = -1;
  int32_t col_begin = 0;
  int32_t col_last = -1;
};

struct Rxfilename {
  std::string path;
  // "path:OFFSET": the object at OFFSET of an archive. Without it the file
  // holds a single object at offset 0.
  bool has_offset = false;
  int64_t offset = 0;
  bool has_range = false;
  MatrixRange range;

  // Back to Kaldi's notation: "path:OFFSET[r0:r1,c0:c1]".
  std::string ToString() const;
};

// Parses `text` (an scp line's rxfilename, trimmed). kUnimplemented for
// pipes and stdin; a BadDataError kMalformedLine at `where` for a bad offset
// or range syntax, or an empty path.
absl::StatusOr<Rxfilename> ParseRxfilename(absl::string_view text,
                                           const DataLocation& where);

// Selects `range` of a matrix read whole, as Kaldi does: the last row may
// lie up to 3 rows past the matrix's last (clamped: Kaldi's 30 ms tolerance);
// anything else outside the matrix is a BadDataError kBadRange at `where`.
absl::Status ApplyRange(const MatrixRange& range, const DataLocation& where,
                        Matrix* m);

struct ScpOptions {
  // Directory relative rxfilename paths are resolved against ("": as given,
  // i.e. the current directory).
  std::string base_dir;
  // Longest line accepted; longer ones are kMalformedLine.
  int32_t max_line_bytes = 1 << 16;
};

// Lines of a text table: `key rest-of-line`, leading and trailing blanks
// removed; blank lines are ignored.
class TextTableReader {
 public:
  // kNotFound etc. when the file cannot be opened (a .gz file is read
  // decompressed).
  static absl::StatusOr<std::unique_ptr<TextTableReader>> Open(
      const std::string& path, int32_t max_line_bytes = 1 << 16);

  // The next non-blank line. Returns false at the end. A line longer than
  // max_line_bytes is a BadDataError kMalformedLine; the reader continues
  // after it. An I/O error ends the reader.
  absl::StatusOr<bool> Next(std::string* key, std::string* value);

  const std::string& path() const { return in_->name(); }
  // 1-based number and byte offset of the line Next() returned last.
  int64_t line() const { return line_; }
  int64_t line_offset() const { return line_offset_; }
  // Non-blank lines returned so far, bad ones included.
  int64_t entries() const { return entries_; }

 private:
  TextTableReader(std::unique_ptr<InputStream> in, int32_t max_line_bytes)
      : in_(std::move(in)), max_line_bytes_(max_line_bytes) {}

  std::unique_ptr<InputStream> in_;
  int32_t max_line_bytes_;
  int64_t line_ = 0;
  int64_t line_offset_ = 0;
  int64_t entries_ = 0;
};

struct ScpEntry {
  std::string key;
  Rxfilename rx;
  int64_t line = 0;         // 1-based line in the scp file
  int64_t line_offset = 0;  // byte offset of that line
  int64_t index = 0;        // 0-based index among the scp's non-blank lines
};

class ScpReader {
 public:
  static absl::StatusOr<std::unique_ptr<ScpReader>> Open(
      const std::string& path, const ScpOptions& options = {});

  // The next entry; false at the end. A line without an rxfilename or with
  // a malformed one is a BadDataError kMalformedLine (naming the scp file,
  // line and key); a pipe is kUnimplemented. Either way `entry` holds the
  // key, line and index of the bad line and Next() may be called again.
  absl::StatusOr<bool> Next(ScpEntry* entry);

  const std::string& path() const { return table_->path(); }

 private:
  ScpReader(std::unique_ptr<TextTableReader> table, ScpOptions options)
      : table_(std::move(table)), options_(std::move(options)) {}

  std::unique_ptr<TextTableReader> table_;
  ScpOptions options_;
};

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_SCP_H_
