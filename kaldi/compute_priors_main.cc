// compute_priors: pdf counts over alignments (as Kaldi's analyze-counts
// writes them) and the priors (counts normalised, a Kaldi float vector) a
// hybrid decoder divides the network's posteriors by; see priors.h.
//
//   bazel-bin/kaldi/compute_priors --alignments='exp/tri3_ali/pdf.*.gz'
//       --counts_out=exp/dnn/ali_train_pdf.counts
//       --priors_out=exp/dnn/prior.vec
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/cli.h"
#include "kaldi/alignments.h"
#include "kaldi/archive_writer.h"
#include "kaldi/bad_data.h"
#include "kaldi/priors.h"

ABSL_FLAG(std::string, alignments, "",
          "pdf-id alignment archives (required): comma-separated files and "
          "glob patterns, binary or text, gzip'd or not.");
ABSL_FLAG(int, num_classes, 0,
          "Number of pdfs (0: the largest label + 1). Labels must be below "
          "it.");
ABSL_FLAG(std::string, counts_out, "",
          "Write the counts here as a text vector \" [ c0 c1 ... ]\", the "
          "format of analyze-counts --binary=false.");
ABSL_FLAG(std::string, priors_out, "",
          "Write the priors (counts / total) here as a Kaldi float vector.");
ABSL_FLAG(
    bool, binary, true,
    "Priors as a binary vector (\"FV\"); false: text \" [ p0 p1 ... ]\".");
ABSL_FLAG(std::string, bad_data, "refuse",
          "`refuse`: a bad alignment is an error; `skip`: it is left out and "
          "counted.");

int main(int argc, char** argv) {
  const std::vector<char*> positional = asgd::ParseCommandLine(
      argc, argv,
      "compute_priors: pdf counts and priors from pdf-id alignments.\n"
      "Usage: compute_priors --alignments=FILES [--num_classes=N] "
      "[--counts_out=FILE] [--priors_out=FILE]");
  if (positional.size() > 1) {
    std::fprintf(stderr, "compute_priors: unexpected argument \"%s\"\n",
                 positional[1]);
    return 2;
  }
  const std::string counts_out = absl::GetFlag(FLAGS_counts_out);
  const std::string priors_out = absl::GetFlag(FLAGS_priors_out);
  if (absl::GetFlag(FLAGS_alignments).empty() ||
      (counts_out.empty() && priors_out.empty()) ||
      absl::GetFlag(FLAGS_num_classes) < 0) {
    std::fprintf(stderr,
                 "compute_priors: --alignments and --counts_out or "
                 "--priors_out are required, --num_classes >= 0; see --help\n");
    return 2;
  }
  auto policy = asgd::kaldi::ParseBadDataPolicy(absl::GetFlag(FLAGS_bad_data));
  if (!policy.ok()) {
    std::fprintf(stderr, "compute_priors: --bad_data: %s\n",
                 std::string(policy.status().message()).c_str());
    return 2;
  }
  auto files = asgd::kaldi::ExpandFileList(absl::GetFlag(FLAGS_alignments));
  if (!files.ok()) {
    std::fprintf(stderr, "compute_priors: error: %s\n",
                 files.status().ToString().c_str());
    return 1;
  }
  auto counts =
      asgd::kaldi::CountPdfs(*files, absl::GetFlag(FLAGS_num_classes), *policy);
  if (!counts.ok()) {
    std::fprintf(stderr, "compute_priors: error: %s\n",
                 counts.status().ToString().c_str());
    return 1;
  }
  if (!counts_out.empty()) {
    const std::vector<double> c(counts->counts.begin(), counts->counts.end());
    const absl::Status s = asgd::kaldi::WriteDoubleVectorFile(counts_out, c);
    if (!s.ok()) {
      std::fprintf(stderr, "compute_priors: error: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (!priors_out.empty()) {
    const absl::Status s = asgd::kaldi::WriteFloatVectorFile(
        priors_out, asgd::kaldi::PriorsFromCounts(counts->counts),
        absl::GetFlag(FLAGS_binary));
    if (!s.ok()) {
      std::fprintf(stderr, "compute_priors: error: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  int unseen = 0;
  for (int64_t c : counts->counts) unseen += c == 0;
  std::printf(
      "compute_priors: %lld alignments, %lld frames, %zu pdfs (%d never "
      "seen), skipped: %s\n",
      static_cast<long long>(counts->utterances),
      static_cast<long long>(counts->frames), counts->counts.size(), unseen,
      counts->bad.ToString().c_str());
  return 0;
}
