// Log-mel filterbank features, the acoustic model's input.
//
// For 16 kHz audio with the default options, each 10 ms frame gets 40 values:
//   1. frame t covers samples [t * 160, t * 160 + 400)  (25 ms window, 10 ms
//      hop; only whole frames, so num_frames = 1 + (n - 400) / 160 for
//      n >= 400 samples and 0 otherwise);
//   2. optional pre-emphasis inside the frame: x[i] -= 0.97 * x[i - 1]
//      (x[0] -= 0.97 * x[0]);
//   3. a Hamming (or Povey) window;
//   4. a 512-point real FFT (fftw3f), power spectrum |X_k|^2, k = 0..256;
//   5. 40 triangular filters equally spaced on the mel scale
//      (mel(f) = 1127 ln(1 + f / 700)) between 20 and 7600 Hz, each triangle
//      defined in the mel domain and peaking at 1;
//   6. log(max(energy, 1e-10)).
// Per-utterance mean normalisation is a separate step, SubtractMean().
//
// Example:
//   ASGD_ASSIGN_OR_RETURN(std::unique_ptr<FilterbankExtractor> extractor,
//                         FilterbankExtractor::Create(FilterbankOptions()));
//   std::vector<float> features = extractor->Compute(samples);
//   ASGD_RETURN_IF_ERROR(SubtractMean(extractor->num_bins(), &features));
#ifndef ASGD_CORPUS_FEATURES_H_
#define ASGD_CORPUS_FEATURES_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace asgd::corpus {

enum class WindowType {
  kHamming,  // 0.54 - 0.46 cos(2 pi i / (N - 1))
  kPovey,    // (0.5 - 0.5 cos(2 pi i / (N - 1)))^0.85, as in Kaldi
};

struct FilterbankOptions {
  int sample_rate = 16000;    // Hz
  int frame_length = 400;     // samples (25 ms)
  int frame_shift = 160;      // samples (10 ms)
  int fft_size = 512;         // >= frame_length
  int num_bins = 40;          // mel filters = feature dimension
  float low_freq = 20.0f;     // Hz, lower edge of the first filter
  float high_freq = 7600.0f;  // Hz, upper edge of the last filter
  float preemphasis = 0.97f;  // 0 turns pre-emphasis off
  WindowType window = WindowType::kHamming;
  float energy_floor = 1e-10f;  // log(max(energy, energy_floor))
};

// Computes log-mel filterbank features with a precomputed window, mel filter
// bank and fftw plan (planned once, with FFTW_ESTIMATE so that results do
// not depend on timing measurements and are reproducible run to run).
//
// Thread-safety: an extractor owns its FFT buffers, so one object must not be
// used by two threads at once; use one extractor per thread. Creating and
// destroying extractors is safe from any thread (this library serialises its
// calls into fftw's planner), but other code in the same process that plans
// with fftw3f concurrently is not coordinated with.
class FilterbankExtractor {
 public:
  // Returns InvalidArgument for inconsistent options (e.g. fft_size <
  // frame_length, high_freq above Nyquist, a filter narrower than one FFT
  // bin) and Internal when fftw cannot plan.
  static absl::StatusOr<std::unique_ptr<FilterbankExtractor>> Create(
      const FilterbankOptions& options);

  ~FilterbankExtractor();
  FilterbankExtractor(const FilterbankExtractor&) = delete;
  FilterbankExtractor& operator=(const FilterbankExtractor&) = delete;

  // Number of whole frames in `num_samples` samples.
  int NumFrames(int num_samples) const;

  // Returns NumFrames(samples.size()) * num_bins() values, frame by frame.
  // Any sample scale works; the generator uses [-1, 1).
  std::vector<float> Compute(absl::Span<const float> samples);

  int num_bins() const { return options_.num_bins; }
  const FilterbankOptions& options() const { return options_; }

  // The mel filter bank as a dense num_bins x (fft_size / 2 + 1) matrix,
  // row-major; for tests and inspection.
  std::vector<float> DenseFilters() const;

  // The analysis window, frame_length values.
  const std::vector<float>& window() const { return window_; }

 private:
  struct Filter {
    int first_bin = 0;           // first FFT bin with a non-zero weight
    std::vector<float> weights;  // weights for bins first_bin, first_bin + 1..
  };
  struct FftwState;  // fftw plan and buffers, kept out of this header

  FilterbankExtractor(const FilterbankOptions& options,
                      std::vector<float> window, std::vector<Filter> filters,
                      std::unique_ptr<FftwState> fft);

  const FilterbankOptions options_;
  const std::vector<float> window_;
  const std::vector<Filter> filters_;
  std::unique_ptr<FftwState> fft_;
  std::vector<float> power_;  // scratch: fft_size / 2 + 1 values
};

// Mel scale used by the filter bank: 1127 ln(1 + hz / 700).
float HzToMel(float hz);
float MelToHz(float mel);

// Per-utterance mean normalisation: subtracts, in place, each dimension's
// mean over the frames of `features` (num_frames * dim values, frame by
// frame). Zero frames is fine. Returns InvalidArgument, changing nothing,
// unless `dim` is positive and divides features->size().
absl::Status SubtractMean(int dim, std::vector<float>* features);

}  // namespace asgd::corpus

#endif  // ASGD_CORPUS_FEATURES_H_
