// Parsing of the Kaldi objects a hybrid trainer reads, at an InputStream's
// current position: archive keys, matrices, float vectors and int32 vectors,
// in binary and in text form.
//
// Binary objects start with "\0B" (all numbers little-endian):
//   matrix  "FM " | "DM "  then \x04 rows \x04 cols, rows×cols values
//           "CM " | "CM2 " | "CM3 "  then a compressed matrix
//                                    (compressed_matrix.h)
//   vector  "FV " | "DV "  then \x04 dim, dim values
//   int32 vector           \x04 n, then n × (\x04 int32)
//   posterior              \x04 frames, then per frame \x04 n and
//                          n × (\x04 int32 id, \x04 float | \x08 double)
// Text objects ("ark,t"):
//   matrix  "[" rows of numbers, each ended by a newline (or ";"), "]"
//   vector  "[ v0 v1 ... ]"
//   int32 vector           "v0 v1 ..." up to the end of the line
//   posterior              "[ id w id w ... ] [ ... ]" (a frame per
//                          bracket) up to the end of the line
// Double data is converted to float for Matrix and float vectors, float data
// widened for DoubleMatrix; "nan", "inf" are read in text as Kaldi reads them
// (callers check finiteness).
//
// Errors are BadDataErrors (bad_data.h) at the object's starting offset,
// naming `key` when it is not empty:
//   kTruncated        the data ends inside the object
//   kUnknownToken     an unknown token, or an object of another kind
//                     (an int32 vector where a matrix belongs, ...)
//   kMalformedObject  a size byte other than 4, negative dimensions, a
//                     compressed header with a non-finite min or range or
//                     a range <= 0 (Kaldi's writer never makes one: it
//                     widens a constant matrix's range), ragged or
//                     non-numeric text
//   kTooLarge         more elements than ReadLimits allows
// or the stream's read error (InputStream::io_status). After an error the
// stream's position is unspecified: an archive cannot be read further.
//
// Memory: an object's storage grows with the bytes actually read, so a
// header that claims more data than the stream holds fails as kTruncated
// without allocating for the claim.
//
// Thread-safety: the functions are reentrant; the stream is not shared.
#ifndef ASGD_KALDI_OBJECT_READER_H_
#define ASGD_KALDI_OBJECT_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kaldi/input_stream.h"
#include "kaldi/matrix.h"

namespace asgd::kaldi {

struct ReadLimits {
  // Elements of one matrix or vector (2^28 floats: 1 GiB).
  int64_t max_elements = int64_t{1} << 28;
  // Bytes of one archive key.
  int32_t max_key_bytes = 4096;
  // Characters of one text token or text line (text objects only).
  int32_t max_text_line_bytes = 1 << 24;
};

// How an object was stored (for tests and statistics).
enum class ObjectFormat {
  kFloatMatrix,    // FM
  kDoubleMatrix,   // DM
  kCompressedCM,   // CM
  kCompressedCM2,  // CM2
  kCompressedCM3,  // CM3
  kTextMatrix,
  kFloatVector,   // FV
  kDoubleVector,  // DV
  kTextVector,
  kInt32Vector,
  kTextInt32Vector,
  kPosterior,
  kTextPosterior,
};

// Reads the key of the next archive entry and the separator after it
// (a space or tab, consumed; or a newline, left for the object, as Kaldi
// does). Leading whitespace is skipped. Returns false at a clean end of the
// archive (only whitespace left).
absl::StatusOr<bool> ReadArchiveKey(InputStream* in, const ReadLimits& limits,
                                    std::string* key);

// A matrix in any of FM, DM, CM, CM2, CM3 or text form.
absl::Status ReadMatrixObject(InputStream* in, const ReadLimits& limits,
                              absl::string_view key, Matrix* out,
                              ObjectFormat* format = nullptr);
absl::Status ReadMatrixObject(InputStream* in, const ReadLimits& limits,
                              absl::string_view key, DoubleMatrix* out,
                              ObjectFormat* format = nullptr);

// A vector in FV, DV or text form.
absl::Status ReadFloatVectorObject(InputStream* in, const ReadLimits& limits,
                                   absl::string_view key,
                                   std::vector<float>* out,
                                   ObjectFormat* format = nullptr);

// An int32 vector, binary or text (alignments).
absl::Status ReadInt32VectorObject(InputStream* in, const ReadLimits& limits,
                                   absl::string_view key,
                                   std::vector<int32_t>* out,
                                   ObjectFormat* format = nullptr);

// A Posterior, binary or text. Its frames and its pairs in all are each
// bounded by ReadLimits::max_elements (kTooLarge), a negative count or a
// weight of another size than 4 or 8 is kMalformedObject. Implemented in
// posterior_object.cc.
absl::Status ReadPosteriorObject(InputStream* in, const ReadLimits& limits,
                                 absl::string_view key, Posterior* out,
                                 ObjectFormat* format = nullptr);

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_OBJECT_READER_H_
