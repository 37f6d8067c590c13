#include "worker/dnn.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace asgd {

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

int64_t DnnParamCount(const DnnSpec& spec) {
  int64_t n = 0;
  for (int l = 0; l < spec.num_layers(); ++l) {
    n += int64_t{spec.layer_out(l)} * (spec.layer_in(l) + 1);
  }
  return n;
}

namespace {

class CpuDnn final : public DnnBackend {
 public:
  CpuDnn(const DnnSpec& spec, int max_batch)
      : spec_(spec), max_batch_(max_batch), num_params_(DnnParamCount(spec)) {
    int64_t offset = 0;
    for (int l = 0; l < spec.num_layers(); ++l) {
      weight_offset_.push_back(offset);
      offset += int64_t{spec.layer_out(l)} * spec.layer_in(l);
      bias_offset_.push_back(offset);
      offset += spec.layer_out(l);
      acts_.emplace_back(int64_t{max_batch} * spec.layer_out(l));
    }
    int widest = spec.input_dim;
    for (int h : spec.hidden) widest = std::max(widest, h);
    delta_.resize(int64_t{max_batch} * std::max(widest, spec.num_classes));
    delta_prev_.resize(delta_.size());
  }

  absl::string_view name() const override { return "cpu"; }
  const DnnSpec& spec() const override { return spec_; }

  absl::StatusOr<BatchResult> ComputeGradient(absl::Span<const float> params,
                                              absl::Span<const float> inputs,
                                              absl::Span<const int32_t> labels,
                                              absl::Span<float> grad) override {
    const int n = static_cast<int>(labels.size());
    ASGD_RETURN_IF_ERROR(Check(params, inputs, n));
    if (static_cast<int64_t>(grad.size()) != num_params_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient buffer has ", grad.size(), " floats, want ", num_params_));
    }
    for (int i = 0; i < n; ++i) {
      if (labels[i] < 0 || labels[i] >= spec_.num_classes) {
        return absl::InvalidArgumentError(
            absl::StrCat("label ", labels[i], " at row ", i,
                         " outside [0, ", spec_.num_classes, ")"));
      }
    }
    Forward(params.data(), inputs.data(), n);

    // Softmax output: loss, accuracy, and dZ = (p - onehot) / n.
    const int L = spec_.num_layers() - 1;
    const int c = spec_.num_classes;
    const float* probs = acts_[L].data();
    BatchResult result;
    float* dz = delta_.data();
    for (int i = 0; i < n; ++i) {
      const float* p = probs + int64_t{i} * c;
      result.loss -= std::log(std::max(p[labels[i]], 1e-30f));
      result.correct += (std::max_element(p, p + c) - p) == labels[i];
      for (int k = 0; k < c; ++k) {
        dz[int64_t{i} * c + k] = (p[k] - (k == labels[i] ? 1.0f : 0.0f)) / n;
      }
    }
    result.loss /= n;

    for (int l = L; l >= 0; --l) {
      const int in = spec_.layer_in(l), out = spec_.layer_out(l);
      const float* a_prev = l == 0 ? inputs.data() : acts_[l - 1].data();
      // dW = dZ^T A_prev  [out, in];  db = column sums of dZ.
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f,
                  dz, out, a_prev, in, 0.0f, grad.data() + weight_offset_[l],
                  in);
      float* db = grad.data() + bias_offset_[l];
      std::fill(db, db + out, 0.0f);
      for (int i = 0; i < n; ++i) {
        const float* row = dz + int64_t{i} * out;
        for (int k = 0; k < out; ++k) db[k] += row[k];
      }
      if (l == 0) break;
      // dA_prev = dZ W  [n, in], then through the activation.
      float* da = delta_prev_.data();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f,
                  dz, out, params.data() + weight_offset_[l], in, 0.0f, da, in);
      const int64_t m = int64_t{n} * in;
      if (spec_.activation == Activation::kRelu) {
        for (int64_t j = 0; j < m; ++j) da[j] = a_prev[j] > 0.0f ? da[j] : 0.0f;
      } else {
        for (int64_t j = 0; j < m; ++j) da[j] *= a_prev[j] * (1.0f - a_prev[j]);
      }
      std::swap(delta_, delta_prev_);
      dz = delta_.data();
    }
    return result;
  }

  absl::Status Predict(absl::Span<const float> params,
                       absl::Span<const float> inputs,
                       absl::Span<int32_t> out) override {
    const int n = static_cast<int>(out.size());
    ASGD_RETURN_IF_ERROR(Check(params, inputs, n));
    Forward(params.data(), inputs.data(), n);
    const int c = spec_.num_classes;
    const float* probs = acts_.back().data();
    for (int i = 0; i < n; ++i) {
      const float* p = probs + int64_t{i} * c;
      out[i] = static_cast<int32_t>(std::max_element(p, p + c) - p);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Check(absl::Span<const float> params,
                     absl::Span<const float> inputs, int n) const {
    if (static_cast<int64_t>(params.size()) != num_params_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model has ", params.size(), " parameters, want ", num_params_));
    }
    if (n < 1 || n > max_batch_) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch of ", n, " outside [1, ", max_batch_, "]"));
    }
    if (static_cast<int64_t>(inputs.size()) != int64_t{n} * spec_.input_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs have ", inputs.size(), " floats, want ", n,
                       " x ", spec_.input_dim));
    }
    return absl::OkStatus();
  }

  // Fills acts_[l] for every layer; the last holds softmax probabilities.
  void Forward(const float* params, const float* inputs, int n) {
    const int L = spec_.num_layers() - 1;
    for (int l = 0; l <= L; ++l) {
      const int in = spec_.layer_in(l), out = spec_.layer_out(l);
      const float* a_prev = l == 0 ? inputs : acts_[l - 1].data();
      float* z = acts_[l].data();
      const float* b = params + bias_offset_[l];
      for (int i = 0; i < n; ++i) std::copy(b, b + out, z + int64_t{i} * out);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f,
                  a_prev, in, params + weight_offset_[l], in, 1.0f, z, out);
      const int64_t m = int64_t{n} * out;
      if (l < L) {
        if (spec_.activation == Activation::kRelu) {
          for (int64_t j = 0; j < m; ++j) z[j] = std::max(z[j], 0.0f);
        } else {
          for (int64_t j = 0; j < m; ++j) z[j] = 1.0f / (1.0f + std::exp(-z[j]));
        }
      } else {
        for (int i = 0; i < n; ++i) {
          float* row = z + int64_t{i} * out;
          const float mx = *std::max_element(row, row + out);
          float sum = 0.0f;
          for (int k = 0; k < out; ++k) sum += (row[k] = std::exp(row[k] - mx));
          for (int k = 0; k < out; ++k) row[k] /= sum;
        }
      }
    }
  }

  const DnnSpec spec_;
  const int max_batch_;
  const int64_t num_params_;
  std::vector<int64_t> weight_offset_, bias_offset_;
  std::vector<std::vector<float>> acts_;  // per layer [max_batch, out]
  std::vector<float> delta_, delta_prev_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DnnBackend>> CreateCpuDnn(const DnnSpec& spec,
                                                         int max_batch) {
  ASGD_RETURN_IF_ERROR(ValidateDnnSpec(spec));
  if (max_batch < 1) {
    return absl::InvalidArgumentError("max_batch must be at least 1");
  }
  return std::unique_ptr<DnnBackend>(new CpuDnn(spec, max_batch));
}

}  // namespace asgd
