// Writes asgd's built-in corpus (corpus/corpus_io.h) as Kaldi data
// directories, one per split, the layout a Kaldi recipe has after feature
// extraction and alignment:
//
//   OUT/classes.txt          `<class name> <pdf id>` (a Kaldi symbol table)
//   OUT/train/feats.ark      features, compressed as make_fbank.sh writes
//                            them (Kaldi's automatic CM/CM2 choice), or FM
//   OUT/train/feats.scp      `utt /abs/OUT/train/feats.ark:OFFSET`
//   OUT/train/utt2spk        `utt spk`, the speaker being the corpus voice
//   OUT/train/spk2utt        `spk utt utt ...`
//   OUT/train/cmvn.ark, cmvn.scp
//                            per-speaker 2 × (D+1) double statistics of the
//                            features as written (what compute-cmvn-stats
//                            --spk2utt computes from feats.scp)
//   OUT/train/text           `utt transcript`
//   OUT/train/pdf.ark        pdf-id alignments (binary int32 vectors), or
//                            pdf.1.gz when gzip'd
//   OUT/heldout/...          the same for the held-out split
//
// Utterance ids are `<voice>-<corpus id>` (e.g. rms-train-000012), so that
// utt2spk and spk2utt sort alike, as Kaldi's validate_data_dir.sh requires;
// every file is sorted by its key.
//
// Memory: the corpus is loaded whole (LoadCorpus), as the trainer does.
//
// Thread-safety: reentrant (distinct output directories).
#ifndef ASGD_KALDI_CORPUS_EXPORT_H_
#define ASGD_KALDI_CORPUS_EXPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "kaldi/archive_writer.h"

namespace asgd::kaldi {

struct CorpusExportOptions {
  std::string corpus_dir;  // required
  std::string out_dir;     // required; created (its parent must exist)
  MatrixFormat feature_format = MatrixFormat::kCompressedAuto;
  bool gzip_alignments = false;  // pdf.1.gz instead of pdf.ark
  // The training split written this many times over (copy k > 0 of an
  // utterance is keyed `<key>-copy<k>`, same speaker), e.g. to make a data
  // directory larger than memory from a small corpus. In [1, 1000].
  int train_copies = 1;
};

struct CorpusExportSplit {
  int64_t utterances = 0;
  int64_t frames = 0;
  int speakers = 0;
  int64_t feature_bytes = 0;  // size of feats.ark
};

struct CorpusExportSummary {
  int feature_dim = 0;
  int num_classes = 0;
  CorpusExportSplit train;
  CorpusExportSplit heldout;
};

// Errors: those of LoadCorpus (NotFound, InvalidArgument), InvalidArgument
// when a part's .txt file does not match its .bin file, and the I/O
// statuses of the writers. Files are written atomically; a failed export may
// leave some of them.
absl::StatusOr<CorpusExportSummary> ExportCorpusToKaldi(
    const CorpusExportOptions& options);

}  // namespace asgd::kaldi

#endif  // ASGD_KALDI_CORPUS_EXPORT_H_
