// Reading Kaldi archives: front to back (SequentialArchiveReader: a whole
// `ark`, gzip'd or not) and by rxfilename (RxfilenameReader: seek to the
// offset an scp line gives, with a bounded number of open files).
//
// Sequential:
//   ASGD_ASSIGN_OR_RETURN(auto ark, SequentialArchiveReader::Open("pdf.1.gz"));
//   std::vector<int32_t> labels;
//   while (true) {
//     ASGD_ASSIGN_OR_RETURN(bool more, ark->Next());
//     if (!more) break;
//     ASGD_RETURN_IF_ERROR(ark->ReadInt32Vector(&labels));  // ark->key()
//   }
//
// Random access:
//   RxfilenameReader reader(/*max_open_files=*/16);
//   Matrix feats;
//   ASGD_RETURN_IF_ERROR(reader.ReadMatrix(entry.rx, entry.key, &feats));
//
// Errors are those of object_reader.h, plus kOffsetPastEnd for an offset at
// or past the end of its archive, kBadRange for a range outside the matrix,
// and the I/O statuses of input_stream.h for a file that cannot be opened.
// A SequentialArchiveReader cannot go on after a failed read (Kaldi's archives
// have no resynchronisation points): every later call returns the error.
//
// Thread-safety: neither class is thread-safe; use one per thread.
#ifndef ASGD_KALDI_ARCHIVE_READER_H_
#define ASGD_KALDI_ARCHIVE_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kaldi/input_stream.h"
#include "kaldi/matrix.h"
#include "kaldi/object_reader.h"
#include "kaldi/scp.h"

namespace asgd::kaldi {

class SequentialArchiveReader {
 public:
  // `path` is a plain or gzip'd archive.
  static absl::StatusOr<std::unique_ptr<SequentialArchiveReader>> Open(
      const std::string& path, const ReadLimits& limits = {});
  // Reads from `in` (e.g. InputStream::FromMemory).
  SequentialArchiveReader(std::unique_ptr<InputStream> in,
                          const ReadLimits& limits);

  // Reads the next key; false at the end of the archive. Call exactly one
  // Read*() for each entry before the next Next(); Next() skips nothing.
  absl::StatusOr<bool> Next();

  const std::string& key() const { return key_; }
  // Offset of the current entry's object (what an scp line points at).
  int64_t object_offset() const { return object_offset_; }
  const std::string& path() const { return in_->name(); }

  absl::Status ReadMatrix(Matrix* out, ObjectFormat* format = nullptr);
  absl::Status ReadFloatVector(std::vector<float>* out);
  absl::Status ReadInt32Vector(std::vector<int32_t>* out,
                               ObjectFormat* format = nullptr);
  absl::Status ReadPosterior(Posterior* out, ObjectFormat* format = nullptr);

 private:
  absl::Status BeginRead();
  absl::Status EndRead(absl::Status status);

  std::unique_ptr<InputStream> in_;
  ReadLimits limits_;
  std::string key_;
  int64_t object_offset_ = 0;
  bool pending_ = false;  // Next() returned a key whose object is unread
  absl::Status failed_;
};

class RxfilenameReader {
 public:
  explicit RxfilenameReader(int max_open_files = 16,
                            const ReadLimits& limits = {});
  ~RxfilenameReader();

  // The matrix `rx` points at, with its range applied. `key` names the
  // utterance in messages.
  absl::Status ReadMatrix(const Rxfilename& rx, absl::string_view key,
                          Matrix* out, ObjectFormat* format = nullptr);
  // The same, in double (CMVN statistics); a range is kBadRange.
  absl::Status ReadMatrix(const Rxfilename& rx, absl::string_view key,
                          DoubleMatrix* out);

  int open_files() const { return static_cast<int>(files_.size()); }
  // Files opened so far (reopens after eviction included).
  int64_t total_opens() const { return total_opens_; }
  int max_open_files() const { return max_open_files_; }

 private:
  struct OpenFile {
    std::string path;
    std::unique_ptr<InputStream> stream;
    uint64_t last_use = 0;
  };
  // Opens or reuses the file and seeks to the object.
  absl::StatusOr<InputStream*> Position(const Rxfilename& rx,
                                        absl::string_view key);

  int max_open_files_;
  ReadLimits limits_;
  std::vector<OpenFile> files_;
  uint64_t clock_ = 0;
  int64_t total_opens_ = 0;
};

// A file holding one float vector, binary ("FV", "DV") or text
// (" [ v0 v1 ... ]"), as WriteFloatVectorFile (archive_writer.h) and Kaldi's
// copy-vector write it: the priors. Errors as object_reader.h (the file
// named in messages); kMalformedObject for anything after the vector but
// whitespace.
absl::StatusOr<std::vector<float>> ReadFloatVectorFile(
    const std::string& path, const ReadLimits& limits = {});

// A file holding one matrix (FM, DM, compressed or text), read in double:
// e.g. global CMVN statistics. Errors as ReadFloatVectorFile.
absl::StatusOr<DoubleMatrix> ReadDoubleMatrixFile(
    const std::string& path, const ReadLimits& limits = {});

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_ARCHIVE_READER_H_
