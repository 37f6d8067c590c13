#include "corpus/features.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/base/const_init.h"
#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace asgd::corpus {
namespace {

constexpr double kPi = 3.14159265358979323846;

// fftw's planner keeps process-wide state and is not thread-safe; executing a
// plan is. Every plan created or destroyed by this library goes through this
// lock.
ABSL_CONST_INIT absl::Mutex fftw_planner_mutex(absl::kConstInit);

absl::Status CheckOptions(const FilterbankOptions& o) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad filterbank options: ", what));
  };
  if (o.sample_rate <= 0) return bad("sample_rate must be positive");
  if (o.frame_length <= 1) return bad("frame_length must be > 1");
  if (o.frame_shift <= 0) return bad("frame_shift must be positive");
  if (o.fft_size < o.frame_length) return bad("fft_size < frame_length");
  if (o.num_bins <= 0) return bad("num_bins must be positive");
  if (!(o.low_freq >= 0 && o.low_freq < o.high_freq &&
        o.high_freq <= 0.5f * o.sample_rate)) {
    return bad("need 0 <= low_freq < high_freq <= sample_rate / 2");
  }
  if (!(o.preemphasis >= 0 && o.preemphasis < 1)) {
    return bad("preemphasis must be in [0, 1)");
  }
  if (!(o.energy_floor > 0)) return bad("energy_floor must be positive");
  return absl::OkStatus();
}

std::vector<float> MakeWindow(const FilterbankOptions& o) {
  std::vector<float> window(o.frame_length);
  const double a = 2 * kPi / (o.frame_length - 1);
  for (int i = 0; i < o.frame_length; ++i) {
    const double hann = 0.5 - 0.5 * std::cos(a * i);
    switch (o.window) {
      case WindowType::kHamming:
        window[i] = static_cast<float>(0.54 - 0.46 * std::cos(a * i));
        break;
      case WindowType::kPovey:
        window[i] = static_cast<float>(std::pow(hann, 0.85));
        break;
    }
  }
  return window;
}

}  // namespace

float HzToMel(float hz) { return 1127.0f * std::log1p(hz / 700.0f); }
float MelToHz(float mel) { return 700.0f * std::expm1(mel / 1127.0f); }

struct FilterbankExtractor::FftwState {
  float* input = nullptr;           // fft_size real values
  fftwf_complex* output = nullptr;  // fft_size / 2 + 1 complex values
  fftwf_plan plan = nullptr;

  ~FftwState() {
    absl::MutexLock lock(&fftw_planner_mutex);
    if (plan != nullptr) fftwf_destroy_plan(plan);
    fftwf_free(input);
    fftwf_free(output);
  }
};

absl::StatusOr<std::unique_ptr<FilterbankExtractor>>
FilterbankExtractor::Create(const FilterbankOptions& options) {
  if (absl::Status status = CheckOptions(options); !status.ok()) return status;

  const int num_fft_bins = options.fft_size / 2 + 1;
  const float mel_low = HzToMel(options.low_freq);
  const float mel_high = HzToMel(options.high_freq);
  const float mel_delta = (mel_high - mel_low) / (options.num_bins + 1);
  std::vector<Filter> filters(options.num_bins);
  for (int b = 0; b < options.num_bins; ++b) {
    const float left = mel_low + b * mel_delta;
    const float center = left + mel_delta;
    const float right = center + mel_delta;
    Filter& filter = filters[b];
    for (int k = 0; k < num_fft_bins; ++k) {
      const float mel = HzToMel(static_cast<float>(k) * options.sample_rate /
                                options.fft_size);
      float weight = 0;
      if (mel > left && mel <= center) {
        weight = (mel - left) / (center - left);
      } else if (mel > center && mel < right) {
        weight = (right - mel) / (right - center);
      }
      if (weight <= 0) continue;
      if (filter.weights.empty()) filter.first_bin = k;
      // Bins between first_bin and k are inside the triangle, so contiguous.
      filter.weights.resize(k - filter.first_bin + 1, 0.0f);
      filter.weights.back() = weight;
    }
    if (filter.weights.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad filterbank options: mel filter ", b,
          " covers no FFT bin; use fewer bins or a larger fft_size"));
    }
  }

  auto fft = std::make_unique<FftwState>();
  {
    absl::MutexLock lock(&fftw_planner_mutex);
    fft->input = fftwf_alloc_real(options.fft_size);
    fft->output = fftwf_alloc_complex(num_fft_bins);
    if (fft->input != nullptr && fft->output != nullptr) {
      fft->plan = fftwf_plan_dft_r2c_1d(options.fft_size, fft->input,
                                        fft->output, FFTW_ESTIMATE);
    }
  }
  if (fft->plan == nullptr) {
    return absl::InternalError(
        absl::StrCat("fftw cannot plan a ", options.fft_size, "-point FFT"));
  }
  return absl::WrapUnique(new FilterbankExtractor(
      options, MakeWindow(options), std::move(filters), std::move(fft)));
}

FilterbankExtractor::FilterbankExtractor(const FilterbankOptions& options,
                                         std::vector<float> window,
                                         std::vector<Filter> filters,
                                         std::unique_ptr<FftwState> fft)
    : options_(options),
      window_(std::move(window)),
      filters_(std::move(filters)),
      fft_(std::move(fft)),
      power_(options.fft_size / 2 + 1) {}

FilterbankExtractor::~FilterbankExtractor() = default;

int FilterbankExtractor::NumFrames(int num_samples) const {
  if (num_samples < options_.frame_length) return 0;
  return 1 + (num_samples - options_.frame_length) / options_.frame_shift;
}

std::vector<float> FilterbankExtractor::Compute(
    absl::Span<const float> samples) {
  const int num_frames = NumFrames(static_cast<int>(
      std::min<size_t>(samples.size(), static_cast<size_t>(INT32_MAX))));
  const int n = options_.frame_length;
  const float floor = options_.energy_floor;
  float* in = fft_->input;
  std::fill(in + n, in + options_.fft_size, 0.0f);
  std::vector<float> features(static_cast<size_t>(num_frames) *
                              options_.num_bins);
  for (int t = 0; t < num_frames; ++t) {
    const float* frame =
        samples.data() + static_cast<size_t>(t) * options_.frame_shift;
    std::copy(frame, frame + n, in);
    if (options_.preemphasis > 0) {
      for (int i = n - 1; i > 0; --i) in[i] -= options_.preemphasis * in[i - 1];
      in[0] -= options_.preemphasis * in[0];
    }
    for (int i = 0; i < n; ++i) in[i] *= window_[i];
    fftwf_execute(fft_->plan);
    for (size_t k = 0; k < power_.size(); ++k) {
      const float re = fft_->output[k][0];
      const float im = fft_->output[k][1];
      power_[k] = re * re + im * im;
    }
    float* out = features.data() + static_cast<size_t>(t) * options_.num_bins;
    for (int b = 0; b < options_.num_bins; ++b) {
      const Filter& filter = filters_[b];
      float energy = 0;
      for (size_t j = 0; j < filter.weights.size(); ++j) {
        energy += filter.weights[j] * power_[filter.first_bin + j];
      }
      out[b] = std::log(std::max(energy, floor));
    }
  }
  return features;
}

std::vector<float> FilterbankExtractor::DenseFilters() const {
  const size_t num_fft_bins = power_.size();
  std::vector<float> dense(filters_.size() * num_fft_bins, 0.0f);
  for (size_t b = 0; b < filters_.size(); ++b) {
    const Filter& filter = filters_[b];
    std::copy(filter.weights.begin(), filter.weights.end(),
              dense.begin() + b * num_fft_bins + filter.first_bin);
  }
  return dense;
}

absl::Status SubtractMean(int dim, std::vector<float>* features) {
  if (dim <= 0 || features->size() % dim != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SubtractMean: ", features->size(),
                     " values are not whole frames of ", "dimension ", dim));
  }
  const size_t num_frames = features->size() / dim;
  if (num_frames == 0) return absl::OkStatus();
  std::vector<double> sum(dim, 0.0);
  for (size_t t = 0; t < num_frames; ++t) {
    for (int d = 0; d < dim; ++d) sum[d] += (*features)[t * dim + d];
  }
  std::vector<float> mean(dim);
  for (int d = 0; d < dim; ++d)
    mean[d] = static_cast<float>(sum[d] / num_frames);
  for (size_t t = 0; t < num_frames; ++t) {
    for (int d = 0; d < dim; ++d) (*features)[t * dim + d] -= mean[d];
  }
  return absl::OkStatus();
}

}  // namespace asgd::corpus
