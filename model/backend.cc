#include "model/backend.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "compression/one_bit_plan.h"

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

ModelBackend::ModelBackend() = default;
ModelBackend::~ModelBackend() = default;

namespace {

int64_t ParamCount(const ModelBackend& backend) {
  return ModelParamCount(backend.spec());
}

absl::Status CheckModelSized(const ModelBackend& backend, const char* what,
                             size_t size) {
  if (static_cast<int64_t>(size) != ParamCount(backend)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", size, " values for a model of ",
                     ParamCount(backend), " parameters"));
  }
  return absl::OkStatus();
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
  ASGD_RETURN_IF_ERROR(CheckModelSized(*this, "LoadModel", params.size()));
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  std::copy(params.begin(), params.end(), state->params.begin());
  state->loaded = true;
  return absl::OkStatus();
}

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

absl::Status ModelBackend::TakeAverage(absl::Span<float> out) {
  ASGD_RETURN_IF_ERROR(CheckModelSized(*this, "TakeAverage", out.size()));
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

absl::Status ModelBackend::TakeOneBit(const OneBitPlan& plan,
                                      absl::Span<char> out) {
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  ASGD_RETURN_IF_ERROR(plan.Validate(ParamCount(*this)));
  if (static_cast<int64_t>(out.size()) != plan.total_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("TakeOneBit: ", out.size(), " bytes for a plan of ",
                     plan.total_bytes));
  }
  const float scale =
      state->accumulated > 0 ? 1.0f / state->accumulated : 0.0f;
  absl::Status status = EncodeOneBitPlan(
      plan, state->sum, scale, absl::MakeSpan(state->residual), out);
  std::fill(state->sum.begin(), state->sum.end(), 0.0f);
  state->accumulated = 0;
  return status;
}

absl::Status ModelBackend::RestoreResidual(int64_t flat_begin,
                                           absl::Span<const float> values) {
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  const int64_t n = ParamCount(*this);
  const int64_t count = static_cast<int64_t>(values.size());
  if (flat_begin < 0 || flat_begin > n - count) {
    return absl::InvalidArgumentError(
        absl::StrCat("RestoreResidual: [", flat_begin, ", ",
                     flat_begin + count, ") outside a model of ", n));
  }
  for (int64_t i = 0; i < count; ++i) {
    state->residual[flat_begin + i] += values[i];
  }
  return absl::OkStatus();
}

absl::Status ModelBackend::ReadResidual(absl::Span<float> out) {
  ASGD_RETURN_IF_ERROR(CheckModelSized(*this, "ReadResidual", out.size()));
  ASGD_ASSIGN_OR_RETURN(ResidentState * state, State());
  std::copy(state->residual.begin(), state->residual.end(), out.begin());
  return absl::OkStatus();
}

}  // namespace asgd
