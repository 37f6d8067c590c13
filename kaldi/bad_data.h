// Bad Kaldi data: why a record is refused, the error every reader of this
// library returns for it, the refuse/skip policy and the per-reason counts.
//
// Two kinds of failure, told apart by status code:
//  * Bad data: absl::StatusCode::kInvalidArgument, with a BadDataReason in the
//    status payload (BadDataReasonOf) and a message that names the file, the
//    byte offset and, where known, the utterance:
//      "/exp/feats.ark at byte 1234 (utterance spk1-utt7): truncated: the
//       FM data needs 16000 bytes from byte 1249, 120 remain"
//    Callers decide on the code and the reason, never on the text. A
//    BadDataPolicy chooses between failing with the error and skipping the
//    utterance (counted in BadDataCounts).
//  * Everything else: a file that cannot be opened or read (kNotFound,
//    kPermissionDenied, kUnavailable), a path that is not a regular file (a
//    FIFO, a device, a directory: kInvalidArgument without a reason, refused
//    without opening it for reading), an rxfilename this library does not
//    read (kUnimplemented: pipes, stdin), bad options (kInvalidArgument
//    without a reason). These are never skipped.
//
// Thread-safety: the functions are thread-safe; a BadDataCounts is a plain
// value (synchronise concurrent writers yourself).
#ifndef ASGD_KALDI_BAD_DATA_H_
#define ASGD_KALDI_BAD_DATA_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace asgd::kaldi {

enum class BadDataReason : int {
  kNone = 0,
  // A line of feats.scp, cmvn.scp or utt2spk that does not parse (missing
  // rxfilename, bad offset, bad range syntax, an overlong line).
  kMalformedLine,
  // A row/column range outside the matrix it selects from.
  kBadRange,
  // An scp offset at or past the end of its archive.
  kOffsetPastEnd,
  // An archive (or gzip stream) that ends inside a key or an object.
  kTruncated,
  // An object of an unexpected type: an unknown token ("XM "), or a known
  // one where another belongs (a vector where features belong).
  kUnknownToken,
  // A known object with impossible contents: a size byte other than 4,
  // negative dimensions, rows of different lengths in a text matrix, a
  // non-numeric text value, a key that is too long, corrupt gzip data.
  kMalformedObject,
  // An object beyond the configured size limits (ReadLimits).
  kTooLarge,
  // NaN or Inf in features.
  kNonFinite,
  // A finite feature whose magnitude is beyond the bound (e.g. the bytes
  // 0x7e7e7e7e, 8.4e37, or a compressed header with min 1e30): as read, or
  // after CMVN. It would wreck a shared model as surely as a NaN.
  kFeatureMagnitude,
  // Features whose dimension differs from the data set's.
  kDimMismatch,
  // An utterance of feats.scp with no alignment.
  kMissingAlignment,
  // Features and alignment of different lengths.
  kLengthMismatch,
  // A label < 0 or >= the class count.
  kLabelOutOfRange,
  // A key seen twice (feats.scp, alignments).
  kDuplicateKey,
  // No speaker in utt2spk, or no CMVN stats for the speaker.
  kMissingSpeaker,
  // CMVN stats that cannot normalise: wrong shape, count < 1, non-finite.
  kBadCmvn,
  // Teacher-student training from an archive (KaldiDataOptions::teacher_scp):
  // an utterance with no teacher posteriors.
  kMissingTeacher,
  // Teacher posteriors of another shape than the utterance's frames × the
  // classes, non-finite, or rows that are not log-distributions.
  kBadTeacher,
  kNumReasons
};

inline constexpr int kNumBadDataReasons =
    static_cast<int>(BadDataReason::kNumReasons);

// "truncated", "offset_past_end", ...: stable snake_case names, usable as
// metric label values.
absl::string_view BadDataReasonName(BadDataReason reason);

// Where a record lives. Empty/negative fields are left out of messages.
struct DataLocation {
  std::string file;
  int64_t offset = -1;  // byte offset (in decompressed bytes for gzip)
  int64_t line = 0;     // 1-based line of a text table; 0: none
  std::string key;      // utterance (or speaker) id
};

// "FILE at byte N (line L) (utterance K)".
std::string FormatLocation(const DataLocation& where);

// kInvalidArgument "<location>: <reason name>: <what>" with `reason` as
// payload.
absl::Status BadDataError(BadDataReason reason, const DataLocation& where,
                          absl::string_view what);

// The reason of a BadDataError; kNone for any other status (OK included).
BadDataReason BadDataReasonOf(const absl::Status& status);

// Whether `status` is a BadDataError (and hence subject to the policy).
inline bool IsBadData(const absl::Status& status) {
  return BadDataReasonOf(status) != BadDataReason::kNone;
}

// The default bound on |feature| (KaldiDataOptions::max_feature_magnitude,
// the tools' --max_feature_magnitude). Honest features stay far below it.
// Measured on the built-in demo corpus (make_corpus defaults: 1600 + 150
// utterances, 40 log-mel features, 640 k frames) and its Kaldi export
// (corpus_to_kaldi, CM-compressed): largest |feature| 13.4 as stored (13.4
// decompressed), 13.4 after per-speaker mean CMVN, 10.3 after per-speaker
// mean and variance CMVN, 8.7 after the worker's default global CMVN (and
// after the corpus's own normalisation). Log-mel and MFCC features of Kaldi
// recipes typically stay within about 100 (MFCC c0); finite garbage is far
// beyond (0x7e bytes read as floats are 8.4e37). Features on another scale
// (e.g. linear power spectra) need a larger bound.
inline constexpr float kDefaultMaxFeatureMagnitude = 1e4f;

// Checks rows of `cols` features (`values`, row-major): a NaN or an Inf is
// kNonFinite, a finite value with |value| > max_magnitude is
// kFeatureMagnitude; the error is at `where` and names the row, the column,
// the value and `stage` ("as read", "after the CMVN of speaker spk1").
// On success sets *max_abs (when not null) to the largest |value| (0 for
// none). One pass over the values, without a branch per value that can
// fail; the offender is looked for only once one is known to exist.
absl::Status CheckFeatureValues(absl::Span<const float> values, int cols,
                                float max_magnitude, const DataLocation& where,
                                absl::string_view stage,
                                float* max_abs = nullptr);

enum class BadDataPolicy {
  kRefuse,  // the first bad record is an error
  kSkip,    // bad utterances are skipped and counted
};

// "refuse" or "skip"; InvalidArgument otherwise.
absl::StatusOr<BadDataPolicy> ParseBadDataPolicy(absl::string_view text);

// Utterances skipped, by reason. Each utterance is counted once, under the
// first reason found for it.
struct BadDataCounts {
  std::array<int64_t, kNumBadDataReasons> by_reason{};

  void Add(BadDataReason reason) { ++by_reason[static_cast<int>(reason)]; }
  int64_t Get(BadDataReason reason) const {
    return by_reason[static_cast<int>(reason)];
  }
  int64_t Total() const;
  // "truncated=1 non_finite=2" (only non-zero reasons); "none" when empty.
  std::string ToString() const;
};

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_BAD_DATA_H_
