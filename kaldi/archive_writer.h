// Writing Kaldi archives and single-object files, in the binary forms Kaldi's
// own tools write and read:
//   * float matrices, plain ("FM") or compressed ("CM"/"CM2"/"CM3" with
//     Kaldi's quantisation; kCompressedAuto is what `copy-feats
//     --compress=true` and the feature recipes write): features, and the
//     per-utterance log-posteriors or pseudo-log-likelihoods that
//     `latgen-faster-mapped` reads;
//   * double matrices ("DM"): CMVN statistics;
//   * float vectors ("FV"): priors;
//   * int32 vectors: pdf alignments;
// with an optional scp (`key ark_path:offset` per entry).
//
// Example (log-likelihoods for decoding):
//   ArchiveWriterOptions o;
//   o.ark_path = "exp/dnn/loglikes.ark";
//   o.scp_path = "exp/dnn/loglikes.scp";
//   ASGD_ASSIGN_OR_RETURN(auto w, ArchiveWriter::Create(o));
//   ASGD_RETURN_IF_ERROR(w->WriteMatrix(key, loglikes.data(), frames, pdfs));
//   ...
//   ASGD_RETURN_IF_ERROR(w->Close());
//   // latgen-faster-mapped ... final.mdl HCLG.fst ark:exp/dnn/loglikes.ark ...
//
// Files appear atomically: the writer writes "<path>.tmp" names and renames
// them in Close(); a writer destroyed without Close() removes them. An
// archive whose name ends in ".gz" is gzip'd (it then has no scp: offsets
// into compressed data mean nothing to Kaldi).
//
// Thread-safety: an ArchiveWriter is used by one thread at a time.
#ifndef ASGD_KALDI_ARCHIVE_WRITER_H_
#define ASGD_KALDI_ARCHIVE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kaldi/compressed_matrix.h"
#include "kaldi/matrix.h"

namespace asgd::kaldi {

class AtomicFile;  // archive_writer.cc

enum class MatrixFormat {
  kFloat,           // FM
  kCompressedAuto,  // CM for more than 8 rows, else CM2 (Kaldi's default)
  kCompressedCM,
  kCompressedCM2,
  kCompressedCM3,
};

// "fm", "compressed" (auto), "cm", "cm2", "cm3"; InvalidArgument otherwise.
absl::StatusOr<MatrixFormat> ParseMatrixFormat(absl::string_view text);

// The binary object (from "\0B" on, no key) of each kind, appended to `out`.
// EncodeMatrix fails (InvalidArgument) only when compressing NaN or Inf.
absl::Status EncodeMatrix(const float* data, int32_t rows, int32_t cols,
                          MatrixFormat format, std::string* out);
void EncodeDoubleMatrix(const DoubleMatrix& m, std::string* out);
void EncodeFloatVector(absl::Span<const float> v, std::string* out);
void EncodeInt32Vector(absl::Span<const int32_t> v, std::string* out);
void EncodePosterior(const Posterior& post, std::string* out);

struct ArchiveWriterOptions {
  std::string ark_path;  // required; ".gz": gzip'd
  std::string scp_path;  // optional
  // How the archive is named in the scp ("" = ark_path). Recipes write
  // absolute paths.
  std::string scp_ark_name;
  MatrixFormat matrix_format = MatrixFormat::kFloat;
};

class ArchiveWriter {
 public:
  // InvalidArgument for bad options (no ark_path; an scp for a .gz archive);
  // the I/O status when a file cannot be created.
  static absl::StatusOr<std::unique_ptr<ArchiveWriter>> Create(
      const ArchiveWriterOptions& options);
  ~ArchiveWriter();
  ArchiveWriter(const ArchiveWriter&) = delete;
  ArchiveWriter& operator=(const ArchiveWriter&) = delete;

  // Each writes `key` (non-empty, no whitespace: else InvalidArgument) and
  // the object. `data` is rows×cols floats, row-major, in the writer's
  // matrix_format.
  absl::Status WriteMatrix(absl::string_view key, const float* data,
                           int32_t rows, int32_t cols);
  absl::Status WriteMatrix(absl::string_view key, const Matrix& m) {
    return WriteMatrix(key, m.data.data(), m.rows, m.cols);
  }
  absl::Status WriteDoubleMatrix(absl::string_view key, const DoubleMatrix& m);
  absl::Status WriteFloatVector(absl::string_view key,
                                absl::Span<const float> v);
  absl::Status WriteInt32Vector(absl::string_view key,
                                absl::Span<const int32_t> v);
  // Binary, float weights (object_reader.h's Posterior).
  absl::Status WritePosterior(absl::string_view key, const Posterior& post);

  // Flushes and renames the files into place. After an error nothing is
  // renamed.
  absl::Status Close();

  int64_t entries() const { return entries_; }
  int64_t bytes_written() const { return offset_; }

 private:
  ArchiveWriter(ArchiveWriterOptions options, std::unique_ptr<AtomicFile> ark,
                std::unique_ptr<AtomicFile> scp);
  // Checks the state and the key; clears object_.
  absl::Status BeginEntry(absl::string_view key);
  absl::Status WriteEntry(absl::string_view key, const std::string& object);

  ArchiveWriterOptions options_;
  std::unique_ptr<AtomicFile> ark_;
  std::unique_ptr<AtomicFile> scp_;
  std::string object_;  // reused encoding buffer
  int64_t offset_ = 0;
  int64_t entries_ = 0;
  absl::Status failed_;
  bool closed_ = false;
};

// A file holding one binary float vector ("\0BFV ..."), or, with
// binary = false, Kaldi's text form " [ v0 v1 ... ]". Atomic (temporary name
// and rename). Priors are written this way.
absl::Status WriteFloatVectorFile(const std::string& path,
                                  absl::Span<const float> v,
                                  bool binary = true);
// The same for double values (binary "DV"); analyze-counts writes pdf counts
// as a text double vector.
absl::Status WriteDoubleVectorFile(const std::string& path,
                                   absl::Span<const double> v,
                                   bool binary = false);

// Writes `data` to `path` through "<path>.tmp" and a rename.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data);

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_ARCHIVE_WRITER_H_
