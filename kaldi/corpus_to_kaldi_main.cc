// corpus_to_kaldi: writes an asgd corpus as Kaldi data directories (train/
// and heldout/: feats.ark + feats.scp, utt2spk, spk2utt, cmvn.scp, text and
// pdf alignments), the layout a Kaldi recipe has; see corpus_export.h.
//
//   bazel-bin/kaldi/corpus_to_kaldi --corpus=/tmp/asgd-demo/corpus
//       --out=/tmp/asgd-demo/kaldi
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/cli.h"
#include "kaldi/archive_writer.h"
#include "kaldi/corpus_export.h"

ABSL_FLAG(std::string, corpus, "", "asgd corpus directory (required).");
ABSL_FLAG(std::string, out, "",
          "Output directory (required; created): receives classes.txt, "
          "train/ and heldout/.");
ABSL_FLAG(std::string, feature_format, "compressed",
          "Features as `compressed` (Kaldi's default: CM for more than 8 "
          "frames, else CM2), `fm` (plain float), `cm`, `cm2` or `cm3`.");
ABSL_FLAG(bool, gzip_alignments, false,
          "Write the alignments as pdf.1.gz (gzip'd) instead of pdf.ark.");
ABSL_FLAG(int, train_copies, 1,
          "Write the training split this many times over (copies keyed "
          "<utterance>-copy<k>): a data directory larger than memory from a "
          "small corpus, to test streaming.");

namespace {

void PrintSplit(const char* name, const asgd::kaldi::CorpusExportSplit& s) {
  std::printf(
      "%s: %lld utterances, %lld frames, %d speakers, feats.ark %.1f MiB\n",
      name, static_cast<long long>(s.utterances),
      static_cast<long long>(s.frames), s.speakers,
      s.feature_bytes / 1048576.0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> positional = asgd::ParseCommandLine(
      argc, argv,
      "corpus_to_kaldi: writes an asgd corpus as Kaldi data directories "
      "(train/, heldout/) with compressed features, CMVN statistics and pdf "
      "alignments.\nUsage: corpus_to_kaldi --corpus=DIR --out=DIR "
      "[--feature_format=compressed|fm|cm|cm2|cm3] [--gzip_alignments]");
  if (positional.size() > 1) {
    std::fprintf(stderr, "corpus_to_kaldi: unexpected argument \"%s\"\n",
                 positional[1]);
    return 2;
  }
  asgd::kaldi::CorpusExportOptions options;
  options.corpus_dir = absl::GetFlag(FLAGS_corpus);
  options.out_dir = absl::GetFlag(FLAGS_out);
  if (options.corpus_dir.empty() || options.out_dir.empty()) {
    std::fprintf(stderr,
                 "corpus_to_kaldi: --corpus and --out are required; see "
                 "--help\n");
    return 2;
  }
  auto format =
      asgd::kaldi::ParseMatrixFormat(absl::GetFlag(FLAGS_feature_format));
  if (!format.ok()) {
    std::fprintf(stderr, "corpus_to_kaldi: --feature_format: %s\n",
                 std::string(format.status().message()).c_str());
    return 2;
  }
  options.feature_format = *format;
  options.gzip_alignments = absl::GetFlag(FLAGS_gzip_alignments);
  options.train_copies = absl::GetFlag(FLAGS_train_copies);
  auto summary = asgd::kaldi::ExportCorpusToKaldi(options);
  if (!summary.ok()) {
    std::fprintf(stderr, "corpus_to_kaldi: error: %s\n",
                 summary.status().ToString().c_str());
    return 1;
  }
  std::printf("corpus_to_kaldi: %s -> %s (feature dim %d, %d classes)\n",
              options.corpus_dir.c_str(), options.out_dir.c_str(),
              summary->feature_dim, summary->num_classes);
  PrintSplit("train", summary->train);
  PrintSplit("heldout", summary->heldout);
  return 0;
}
