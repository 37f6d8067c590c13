// Speech with exact phone timings from the flite text-to-speech engine.
//
// A Synthesizer turns a sentence into 16 kHz audio with one of flite's US
// English voices, together with the phone segments flite placed in it (its
// utterance's Segment relation: each phone's name and end time). Frame labels
// for acoustic-model training follow from the segments with FrameLabels().
//
// Example:
//   ASGD_ASSIGN_OR_RETURN(std::unique_ptr<Synthesizer> synth,
//                         Synthesizer::Create({"kal16", "slt"}));
//   ASGD_ASSIGN_OR_RETURN(Synthesis s,
//                         synth->Synthesize("hello world", "slt", 1.1f));
//   // s.samples: 16 kHz int16; s.segments: {"pau", 0.22}, {"hh", 0.29}, ...
//
// Thread-safety: flite is not thread-safe (it keeps process-wide state, such
// as each registered voice), so a process uses flite from one thread only,
// and holds at most one Synthesizer at a time (Create fails otherwise). To
// synthesise in parallel, use several processes (the corpus generator forks).
#ifndef ASGD_CORPUS_SYNTH_H_
#define ASGD_CORPUS_SYNTH_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

struct cst_voice_struct;  // flite's voice, from <flite/cst_voice.h>

namespace asgd::corpus {

// The flite voices a corpus may use, all 16 kHz. The position in this list is
// the voice index stored with each utterance of a corpus (kal16 = 0, ...).
inline constexpr std::array<absl::string_view, 4> kVoiceNames = {"kal16", "awb",
                                                                 "rms", "slt"};

// Returns the position of `name` in kVoiceNames, or InvalidArgument naming
// the known voices.
absl::StatusOr<int> VoiceIndex(absl::string_view name);

// One phone of a synthesised utterance: it ends at `end_seconds`, and starts
// where the previous segment ends (the first one at 0). The final silence may
// be cut short in the audio: with kal16 the last segment can end about 0.1 s
// after the last sample.
struct PhoneSegment {
  std::string phone;  // flite's name, e.g. "pau", "ax", "k"
  float end_seconds = 0;
};

struct Synthesis {
  int sample_rate = 0;                 // always 16000 for kVoiceNames
  std::vector<int16_t> samples;        // mono
  std::vector<PhoneSegment> segments;  // in time order

  // The samples scaled to [-1, 1): samples[i] / 32768.
  std::vector<float> FloatSamples() const;
};

class Synthesizer {
 public:
  // Registers the named voices (each of them in kVoiceNames) with flite.
  // Returns InvalidArgument for an unknown or repeated voice name or an empty
  // list, FailedPrecondition while another Synthesizer exists in the process,
  // Internal if flite cannot load a voice.
  static absl::StatusOr<std::unique_ptr<Synthesizer>> Create(
      absl::Span<const std::string> voices);

  // Unregisters the voices.
  ~Synthesizer();
  Synthesizer(const Synthesizer&) = delete;
  Synthesizer& operator=(const Synthesizer&) = delete;

  // Synthesises `text` with `voice` (one given to Create). `duration_stretch`
  // scales every phone's duration (flite's "duration_stretch" feature: > 1 is
  // slower speech), for speed perturbation; it must lie in [0.25, 4].
  // The clustergen voices (awb, rms, slt) draw their unvoiced excitation from
  // the C library's rand(); Synthesize calls srand(random_seed) first, so the
  // result depends only on the arguments, not on earlier calls (this resets
  // rand() for the whole process).
  // Returns InvalidArgument for an unknown voice, a stretch out of range or
  // text that yields no audio, Internal when flite reports an error.
  absl::StatusOr<Synthesis> Synthesize(absl::string_view text,
                                       absl::string_view voice,
                                       float duration_stretch,
                                       unsigned random_seed = 1);

 private:
  using VoiceList = std::vector<std::pair<std::string, cst_voice_struct*>>;
  explicit Synthesizer(VoiceList voices);

  VoiceList voices_;  // registered voices, by name; owned through flite
};

// Labels frames with phone classes (see phone_set.h): frame t, which covers
// [t * frame_shift, t * frame_shift + frame_length) seconds, gets the class of
// the segment covering its centre; a centre after the last segment's end gets
// the last segment's class. Returns InvalidArgument for no segments, end
// times that decrease, or a phone outside the class list.
absl::StatusOr<std::vector<int32_t>> FrameLabels(
    absl::Span<const PhoneSegment> segments, int num_frames,
    double frame_shift_seconds, double frame_length_seconds);

}  // namespace asgd::corpus

#endif  // ASGD_CORPUS_SYNTH_H_
