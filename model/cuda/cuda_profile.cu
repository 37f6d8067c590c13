#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/cuda/cuda_layer.h"
#include "model/cuda/cuda_profile.h"
#include "model/cuda/cuda_util.h"
#include "model/cuda/op_timer.h"

namespace asgd {
namespace {

using cuda::Context;
using cuda::DeviceBuffer;
using cuda::OpTimer;

// A device buffer holding `host`.
absl::StatusOr<DeviceBuffer<float>> Upload(const std::vector<float>& host,
                                           cudaStream_t stream) {
  ASGD_ASSIGN_OR_RETURN(DeviceBuffer<float> d,
                        DeviceBuffer<float>::Create(host.size()));
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.get(), host.data(),
                                            sizeof(float) * host.size(),
                                            cudaMemcpyHostToDevice, stream));
  return d;
}

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// The rows of one pass: its total, then its steps by time.
void AppendPass(const std::string& layer, const char* pass, double total_ms,
                std::vector<OpTimer::OpTime> ops, int iters,
                std::string* table) {
  absl::StrAppendFormat(table, "| %s | %s | **total** | | %.4f | 100%% |\n",
                        layer, pass, total_ms / iters);
  std::sort(ops.begin(), ops.end(),
            [](const OpTimer::OpTime& a, const OpTimer::OpTime& b) {
              return a.ms > b.ms;
            });
  for (const OpTimer::OpTime& op : ops) {
    absl::StrAppendFormat(table, "| %s | %s | %s | %d | %.4f | %.1f%% |\n",
                          layer, pass, op.label, op.calls / iters,
                          op.ms / iters,
                          total_ms > 0 ? 100.0 * op.ms / total_ms : 0.0);
  }
}

// Sums a timer that holds one label per pass.
double TotalMs(const std::vector<OpTimer::OpTime>& times) {
  double ms = 0.0;
  for (const OpTimer::OpTime& t : times) ms += t.ms;
  return ms;
}

absl::Status ProfileLayer(const ModelSpec& spec, int index,
                          const std::vector<float>& model, int sequences,
                          int steps, const CudaOptions& options, int iters,
                          const Context& plain, std::string* table) {
  const int rows = sequences * steps;
  ASGD_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaLayer> layer,
                        cuda::CreateCudaLayer(spec, index, rows, options));
  const int64_t in_n = int64_t{rows} * layer->in_shape().dim();
  const int64_t out_n = int64_t{rows} * layer->out_shape().dim();
  const int64_t offset = LayerParamOffset(spec, index);
  const int64_t count = LayerParamCount(spec, index);
  const std::vector<float> params_h(model.begin() + offset,
                                    model.begin() + offset + count);
  cudaStream_t stream = plain.stream;
  ASGD_ASSIGN_OR_RETURN(DeviceBuffer<float> params, Upload(params_h, stream));
  ASGD_ASSIGN_OR_RETURN(DeviceBuffer<float> in,
                        Upload(RandomVector(in_n, 7 + index), stream));
  ASGD_ASSIGN_OR_RETURN(DeviceBuffer<float> dout0,
                        Upload(RandomVector(out_n, 1007 + index), stream));
  ASGD_ASSIGN_OR_RETURN(DeviceBuffer<float> out,
                        DeviceBuffer<float>::Create(out_n));
  ASGD_ASSIGN_OR_RETURN(DeviceBuffer<float> dout,
                        DeviceBuffer<float>::Create(out_n));
  ASGD_ASSIGN_OR_RETURN(DeviceBuffer<float> dparams,
                        DeviceBuffer<float>::Create(count));
  DeviceBuffer<float> din;
  if (index > 0) {
    ASGD_ASSIGN_OR_RETURN(din, DeviceBuffer<float>::Create(in_n));
  }
  OpTimer forward_steps, backward_steps, passes_forward, passes_backward;
  for (int it = 0; it <= iters; ++it) {
    const bool timed = it > 0;  // pass 0 warms up
    Context fwd = plain, bwd = plain;
    if (timed) {
      fwd.timer = &forward_steps;
      bwd.timer = &backward_steps;
      ASGD_RETURN_IF_ERROR(passes_forward.Begin(stream));
    }
    ASGD_RETURN_IF_ERROR(layer->Forward(fwd, params.get(), in.get(), sequences,
                                        steps, out.get()));
    if (timed) ASGD_RETURN_IF_ERROR(passes_forward.End(stream, "forward"));
    // Backward overwrites dout: a fresh copy each time, outside the timing.
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dout.get(), dout0.get(), sizeof(float) * out_n,
                        cudaMemcpyDeviceToDevice, stream));
    if (timed) ASGD_RETURN_IF_ERROR(passes_backward.Begin(stream));
    ASGD_RETURN_IF_ERROR(layer->Backward(bwd, params.get(), in.get(), out.get(),
                                         dout.get(), sequences, steps,
                                         dparams.get(), din.get()));
    if (timed) ASGD_RETURN_IF_ERROR(passes_backward.End(stream, "backward"));
  }
  ASGD_ASSIGN_OR_RETURN(auto fwd_total, passes_forward.Collect());
  ASGD_ASSIGN_OR_RETURN(auto bwd_total, passes_backward.Collect());
  ASGD_ASSIGN_OR_RETURN(auto fwd_ops, forward_steps.Collect());
  ASGD_ASSIGN_OR_RETURN(auto bwd_ops, backward_steps.Collect());
  const int num = static_cast<int>(spec.layers.size());
  const std::string name =
      index == num
          ? std::string("output")
          : absl::StrCat(index, " ", LayerKindName(spec.layers[index].kind));
  AppendPass(name, "forward", TotalMs(fwd_total), std::move(fwd_ops), iters,
             table);
  AppendPass(name, "backward", TotalMs(bwd_total), std::move(bwd_ops), iters,
             table);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ProfileCudaLayers(const ModelSpec& spec,
                                              int sequences, int steps,
                                              const CudaOptions& options,
                                              int iters) {
  ASGD_RETURN_IF_ERROR(ValidateModelSpec(spec));
  if (sequences < 1 || steps < 1 || iters < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile needs sequences, steps and iters >= 1, got ",
                     sequences, ", ", steps, ", ", iters));
  }
  ASGD_RETURN_IF_ERROR(cuda::CheckCudaOptions(options));
  ASGD_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  ASGD_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::CreateStream());
  ASGD_ASSIGN_OR_RETURN(cuda::Cublas cublas,
                        cuda::CreateCublas(stream.get(), options.math));
  const Context ctx{stream.get(), cublas.get(), options.math, nullptr};
  const std::vector<float> model = InitialParams(spec, 1);
  std::string table =
      absl::StrCat("| layer | pass | step | calls | ms per pass | share |\n",
                   "|---|---|---|---:|---:|---:|\n");
  for (int i = 0; i <= static_cast<int>(spec.layers.size()); ++i) {
    ASGD_RETURN_IF_ERROR(ProfileLayer(spec, i, model, sequences, steps, options,
                                      iters, ctx, &table));
  }
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream.get()));
  return table;
}

}  // namespace asgd
