#include "model/backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/bf16_bits.h"
#include "common/status_macros.h"
#include "compression/one_bit_plan.h"
#include "compression/top_k_plan.h"

namespace asgd {

// The default resident model: host buffers, allocated on first use.
struct ResidentState {
  bool loaded = false;
  int accumulated = 0;
  std::vector<float> params;
  std::vector<float> sum;
  std::vector<float> grad;      // one minibatch's gradient
  std::vector<float> residual;  // 1-bit error feedback
};

// The default mirrors: a host vector per buffer, made on first use.
struct HostMirrors {
  absl::Mutex mu;
  std::map<const float*, std::vector<float>> of ABSL_GUARDED_BY(mu);
};

ModelBackend::ModelBackend() : mirrors_(std::make_unique<HostMirrors>()) {}
ModelBackend::~ModelBackend() = default;

absl::Status CheckModelSized(absl::string_view call, size_t size,
                             int64_t num_params) {
  if (static_cast<int64_t>(size) == num_params) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      call, ": ", size, " values for a model of ", num_params, " parameters"));
}

absl::Status CheckOneBitCall(const OneBitPlan& plan, int64_t num_params,
                             size_t out_bytes) {
  ASGD_RETURN_IF_ERROR(plan.Validate(num_params));
  if (static_cast<int64_t>(out_bytes) != plan.total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TakeOneBit: ", out_bytes, " bytes for a plan of ", plan.total_bytes));
  }
  return absl::OkStatus();
}

absl::Status CheckResidualRange(int64_t begin, size_t count,
                                int64_t num_params) {
  const int64_t n = static_cast<int64_t>(count);
  if (begin >= 0 && begin <= num_params - n) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("RestoreResidual: [", begin, ", ", begin + n,
                   ") outside a model of ", num_params));
}

namespace {

int64_t ParamCount(const ModelBackend& backend) {
  return ModelParamCount(backend.spec());
}

}  // namespace

absl::StatusOr<ResidentState*> ModelBackend::State() {
  if (resident_ == nullptr) {
    const int64_t n = ParamCount(*this);
    resident_ = std::make_unique<ResidentState>();
    resident_->params.assign(n, 0.0f);
    resident_->sum.assign(n, 0.0f);
    resident_->grad.assign(n, 0.0f);
    resident_->residual.assign(n, 0.0f);
  }
  return resident_.get();
}

absl::Status ModelBackend::LoadModel(absl::Span<const float> params) {
  ASGD_RETURN_IF_ERROR(
      CheckModelSized("LoadModel", params.size(), ParamCount(*this)));
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  std::copy(params.begin(), params.end(), state->params.begin());
  state->loaded = true;
  return absl::OkStatus();
}

absl::Status ModelBackend::PinHostBuffer(absl::Span<const float>) {
  return absl::OkStatus();
}

void ModelBackend::UnpinHostBuffer(absl::Span<const float>) {}

absl::StatusOr<BatchResult> ModelBackend::AccumulateGradient(
    const Batch& batch) {
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  if (!state->loaded) {
    return absl::FailedPreconditionError(
        "AccumulateGradient before LoadModel: the backend holds no model");
  }
  ASGD_ASSIGN_OR_RETURN(
      BatchResult result,
      ComputeGradient(state->params, batch, absl::MakeSpan(state->grad)));
  for (float g : state->grad) {
    if (!std::isfinite(g)) {
      result.gradient_finite = false;
      return result;
    }
  }
  for (size_t i = 0; i < state->sum.size(); ++i) state->sum[i] += state->grad[i];
  ++state->accumulated;
  return result;
}

int ModelBackend::accumulated() const {
  return resident_ == nullptr ? 0 : resident_->accumulated;
}

bool ModelBackend::stages_batches() const { return false; }

void ModelBackend::StageNext(const Batch&) {}

absl::Status ModelBackend::TakeAverage(absl::Span<float> out) {
  ASGD_RETURN_IF_ERROR(
      CheckModelSized("TakeAverage", out.size(), ParamCount(*this)));
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  const float scale =
      state->accumulated > 0 ? 1.0f / state->accumulated : 0.0f;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = state->sum[i] * scale;
    state->sum[i] = 0.0f;
  }
  state->accumulated = 0;
  return absl::OkStatus();
}

absl::Status ModelBackend::TakeBf16(absl::Span<uint16_t> out) {
  ASGD_RETURN_IF_ERROR(
      CheckModelSized("TakeBf16", out.size(), ParamCount(*this)));
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  const float scale =
      state->accumulated > 0 ? 1.0f / state->accumulated : 0.0f;
  for (size_t i = 0; i < out.size(); ++i) {
    const float average = state->sum[i] * scale;
    uint32_t bits;
    std::memcpy(&bits, &average, sizeof(bits));
    out[i] = Bf16FromFloatBits(bits);
    state->sum[i] = 0.0f;
  }
  state->accumulated = 0;
  return absl::OkStatus();
}

absl::Status ModelBackend::TakeOneBit(const OneBitPlan& plan,
                                      absl::Span<char> out) {
  ASGD_RETURN_IF_ERROR(CheckOneBitCall(plan, ParamCount(*this), out.size()));
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  const float scale =
      state->accumulated > 0 ? 1.0f / state->accumulated : 0.0f;
  absl::Status status = EncodeOneBitPlan(
      plan, state->sum, scale, absl::MakeSpan(state->residual), out);
  std::fill(state->sum.begin(), state->sum.end(), 0.0f);
  state->accumulated = 0;
  return status;
}

absl::Status ModelBackend::TakeTopK(const TopKPlan& plan,
                                    std::vector<std::string>* out) {
  ASGD_RETURN_IF_ERROR(plan.Validate(ParamCount(*this)));
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  const float scale =
      state->accumulated > 0 ? 1.0f / state->accumulated : 0.0f;
  absl::Status status = EncodeTopKPlan(
      plan, state->sum, scale, absl::MakeSpan(state->residual), out);
  std::fill(state->sum.begin(), state->sum.end(), 0.0f);
  state->accumulated = 0;
  return status;
}

absl::Status ModelBackend::RestoreResidual(int64_t flat_begin,
                                           absl::Span<const float> values) {
  ASGD_RETURN_IF_ERROR(
      CheckResidualRange(flat_begin, values.size(), ParamCount(*this)));
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  const int64_t count = static_cast<int64_t>(values.size());
  for (int64_t i = 0; i < count; ++i) {
    state->residual[flat_begin + i] += values[i];
  }
  return absl::OkStatus();
}

absl::Status ModelBackend::ReadResidual(absl::Span<float> out) {
  ASGD_RETURN_IF_ERROR(
      CheckModelSized("ReadResidual", out.size(), ParamCount(*this)));
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  std::copy(state->residual.begin(), state->residual.end(), out.begin());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExactCopy>> ModelBackend::CreateExactCopy(
    int64_t) {
  return absl::UnimplementedError(absl::StrCat(
      "the ", name(), " backend keeps no exact copies of its own (they stay "
      "in host memory)"));
}

absl::Status CheckMirrorCall(absl::string_view call, size_t buffer_size,
                             int64_t begin, int64_t count, int64_t num_params) {
  ASGD_RETURN_IF_ERROR(CheckModelSized(call, buffer_size, num_params));
  if (begin >= 0 && count >= 0 && begin <= num_params - count) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(call, ": [", begin, ", ", begin + count,
                   ") outside a model of ", num_params));
}

absl::Status ModelBackend::MirrorFromCopy(absl::Span<float> buffer,
                                          int64_t begin,
                                          const ExactCopy& copy) {
  const int64_t n = ParamCount(*this);
  ASGD_RETURN_IF_ERROR(
      CheckMirrorCall("MirrorFromCopy", buffer.size(), begin, copy.size(), n));
  float* mirror;
  {
    absl::MutexLock lock(&mirrors_->mu);
    std::vector<float>& m = mirrors_->of[buffer.data()];
    m.resize(n);
    mirror = m.data();  // stays: no other call resizes it
  }
  return copy.Download(absl::MakeSpan(mirror + begin, copy.size()));
}

absl::Status ModelBackend::DownloadMirror(absl::Span<float> buffer,
                                          int64_t begin, int64_t count) {
  ASGD_RETURN_IF_ERROR(CheckMirrorCall("DownloadMirror", buffer.size(), begin,
                                       count, ParamCount(*this)));
  const float* mirror;
  {
    absl::MutexLock lock(&mirrors_->mu);
    auto it = mirrors_->of.find(buffer.data());
    if (it == mirrors_->of.end()) {
      return absl::FailedPreconditionError(
          "DownloadMirror of a buffer that has no mirror");
    }
    mirror = it->second.data();
  }
  std::copy(mirror + begin, mirror + begin + count, buffer.begin() + begin);
  return absl::OkStatus();
}

absl::Status ModelBackend::LoadMirroredModel(absl::Span<const float> buffer) {
  ASGD_RETURN_IF_ERROR(
      CheckModelSized("LoadMirroredModel", buffer.size(), ParamCount(*this)));
  const std::vector<float>* mirror;
  {
    absl::MutexLock lock(&mirrors_->mu);
    auto it = mirrors_->of.find(buffer.data());
    if (it == mirrors_->of.end()) {
      return absl::FailedPreconditionError(
          "LoadMirroredModel of a buffer that has no mirror");
    }
    mirror = &it->second;
  }
  return LoadModel(*mirror);
}

}  // namespace asgd
