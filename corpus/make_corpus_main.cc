// make_corpus: generates the asgd training corpus with flite.
//
//   bazel-bin/corpus/make_corpus --out=/tmp/corpus
//
// See generator.h for what is generated and corpus_io.h for the format.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "corpus/generator.h"

// Flag defaults come from GeneratorOptions, so the two cannot drift apart.
using Defaults = asgd::corpus::GeneratorOptions;

ABSL_FLAG(std::string, out, "",
          "Output directory (required; created if missing). Receives "
          "train-PP.bin/.txt and heldout-PP.bin/.txt per job and, once "
          "everything is written, corpus.txt.");
ABSL_FLAG(int, num_train, Defaults().num_train,
          "Training utterances. Sentences are reused with other voices and "
          "speeds when this exceeds the available sentences.");
ABSL_FLAG(int, num_heldout, Defaults().num_heldout,
          "Held-out utterances, one per held-out sentence; these sentences "
          "are a fixed set (independent of --seed) never used for training.");
ABSL_FLAG(std::string, voices, absl::StrJoin(Defaults().voices, ","),
          "Comma-separated flite voices to draw from, among kal16, awb, rms, "
          "slt (all 16 kHz).");
ABSL_FLAG(uint64_t, seed, Defaults().seed,
          "Random seed: the corpus is a deterministic function of the flags "
          "(except --jobs and --out, which do not change its content).");
ABSL_FLAG(int, jobs, 0,
          "Child processes synthesising in parallel (flite is not "
          "thread-safe); 0 means the number of online CPUs.");
ABSL_FLAG(float, speed_min, Defaults().speed_min,
          "Smallest duration stretch (speed perturbation; 1 = normal, > 1 = "
          "slower), drawn uniformly per utterance.");
ABSL_FLAG(float, speed_max, Defaults().speed_max, "Largest duration stretch.");
ABSL_FLAG(bool, noise, Defaults().add_noise,
          "Add white Gaussian noise at a random SNR per utterance; "
          "--nonoise disables it.");
ABSL_FLAG(float, snr_db_min, Defaults().snr_db_min,
          "Lowest signal-to-noise ratio in dB (with --noise).");
ABSL_FLAG(float, snr_db_max, Defaults().snr_db_max,
          "Highest signal-to-noise ratio in dB (with --noise).");
ABSL_FLAG(std::string, text_dir, Defaults().text_dir,
          "Directory whose plain-text files give the sentences.");
ABSL_FLAG(bool, progress, true, "Print progress and a summary on stderr.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Generates a labelled speech corpus for asgd: flite speech from several "
      "voices with speed perturbation and noise, as 40-dim log-mel features "
      "per 10 ms frame with one phone label (40 classes) per frame.\n"
      "Usage: make_corpus --out=DIR [--num_train=N] [--num_heldout=N] "
      "[--voices=kal16,awb,rms,slt] [--seed=S] [--jobs=J] ...");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr,
                 "make_corpus: unexpected argument \"%s\"; see --help\n",
                 positional[1]);
    return 2;
  }
  asgd::corpus::GeneratorOptions options;
  options.out_dir = absl::GetFlag(FLAGS_out);
  if (options.out_dir.empty()) {
    std::fprintf(stderr, "make_corpus: --out is required; see --help\n");
    return 2;
  }
  options.num_train = absl::GetFlag(FLAGS_num_train);
  options.num_heldout = absl::GetFlag(FLAGS_num_heldout);
  options.voices =
      absl::StrSplit(absl::GetFlag(FLAGS_voices), ',', absl::SkipWhitespace());
  options.seed = absl::GetFlag(FLAGS_seed);
  options.jobs = absl::GetFlag(FLAGS_jobs);
  options.speed_min = absl::GetFlag(FLAGS_speed_min);
  options.speed_max = absl::GetFlag(FLAGS_speed_max);
  options.add_noise = absl::GetFlag(FLAGS_noise);
  options.snr_db_min = absl::GetFlag(FLAGS_snr_db_min);
  options.snr_db_max = absl::GetFlag(FLAGS_snr_db_max);
  options.text_dir = absl::GetFlag(FLAGS_text_dir);
  options.log_progress = absl::GetFlag(FLAGS_progress);

  const absl::Status status = asgd::corpus::GenerateCorpus(options);
  if (!status.ok()) {
    std::fprintf(stderr, "make_corpus: error: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
