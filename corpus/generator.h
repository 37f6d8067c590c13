// Generates a labelled speech corpus (the format of corpus_io.h) with flite.
//
// Sentences: the clauses of the text files in `text_dir` (sentences.h). A
// fixed set of them, the first `num_heldout` of one constant shuffle of the
// clause list, does not depend on `seed` and is read only in the held-out
// split; training sentences come from the rest, shuffled with `seed`, and
// are reused (with fresh voices and speeds) when `num_train` exceeds them.
// Every utterance draws its voice (uniformly from `voices`), its duration
// stretch (uniform in [speed_min, speed_max]), its noise SNR (uniform in
// [snr_db_min, snr_db_max] dB) and its noise from a random stream derived
// from `seed` and its position alone, so the corpus's utterances are a
// deterministic function of the options whatever `jobs` is, and the files are
// byte-identical for equal options.
//
// Per utterance: flite audio (16 kHz) + white Gaussian noise at the SNR
// (relative to the utterance's mean power) -> 40 log-mel features per 10 ms
// frame (features.h defaults), mean-normalised per utterance, and one label
// per frame, the phone class at the frame's centre (synth.h FrameLabels).
//
// Process structure: flite is not thread-safe, so GenerateCorpus fork()s
// `jobs` child processes; child p synthesises the p-th contiguous slice of
// each split and writes train-PP.bin/.txt and heldout-PP.bin/.txt, then
// _exit()s. The parent waits for every child, checks each exit status, reads
// the training parts back to compute the global per-dimension mean and
// standard deviation, and writes corpus.txt last. A corpus.txt from an
// earlier run is deleted first, so corpus.txt exists only for a complete
// corpus.
//
// Thread-safety and processes: GenerateCorpus may be called from a test
// binary or any other program, preferably before it starts threads (fork
// copies only the calling thread), and not while the process holds a
// Synthesizer (each child creates its own, which flite allows once per
// process). The calling thread blocks until the corpus is complete; children
// never return into the caller's code (they _exit).
#ifndef ASGD_CORPUS_GENERATOR_H_
#define ASGD_CORPUS_GENERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace asgd::corpus {

struct GeneratorOptions {
  std::string out_dir;    // created if missing (with parents)
  int num_train = 1600;   // training utterances, >= 1
  int num_heldout = 150;  // held-out utterances, >= 0, fewer than clauses
  std::vector<std::string> voices = {"kal16", "awb", "rms", "slt"};
  uint64_t seed = 1;
  int jobs = 0;  // child processes; <= 0 means the number of online CPUs
  // Duration stretch range (flite "duration_stretch"; > 1 is slower).
  float speed_min = 0.9f;
  float speed_max = 1.2f;
  // Additive white noise at a random SNR per utterance.
  bool add_noise = true;
  float snr_db_min = 15.0f;
  float snr_db_max = 40.0f;
  std::string text_dir = "/usr/share/common-licenses";
  // Progress lines (about every 10% per job) and a summary line on stderr.
  bool log_progress = false;
};

// What GenerateCorpus made.
struct GenerationStats {
  int jobs = 0;  // child processes used
  int64_t train_utterances = 0;
  int64_t heldout_utterances = 0;
  int64_t train_frames = 0;
  int64_t heldout_frames = 0;
  double audio_hours = 0;   // (train_frames + heldout_frames) * 10 ms
  double wall_seconds = 0;  // time GenerateCorpus took
};

// Generates the corpus described above into options.out_dir. Returns
// InvalidArgument for bad options (unknown voice, empty ranges, too many
// held-out sentences), the error of the directory or text source when they
// cannot be used, and Internal naming the job and its error when a child
// process fails. On success fills `*stats` when `stats` is not null.
absl::Status GenerateCorpus(const GeneratorOptions& options,
                            GenerationStats* stats = nullptr);

}  // namespace asgd::corpus

#endif  // ASGD_CORPUS_GENERATOR_H_
