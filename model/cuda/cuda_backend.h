// The CUDA ModelBackend (model/backend.h): the same model, parameter layout
// and results as CreateCpuBackend() (model/cpu_backend.h), for every layer
// kind of model/model_spec.h (dense, conv with max-pooling, LSTM and BLSTM
// with projection and cell clipping), with the GEMMs in cuBLAS and the rest
// in small CUDA kernels. Each layer type's CUDA code sits in its own file
// behind the internal CudaLayer interface (cuda_layer.h: cuda_dense.cu,
// cuda_conv.cu, cuda_lstm.cu), driven in order the way model/cpu_backend.cc
// drives model/layers/. The loss as the CPU backend's (model/softmax_loss.h):
// a multi-frame model's output_frames heads of num_classes logits per row,
// each with its label, and a taught batch's soft targets
// (cuda_soft_targets.h, loss_impl.h).
//
//   auto backend = CreateCudaBackend(spec, /*max_rows=*/256);
//   if (!backend.ok()) ...  // kUnavailable when the machine has no CUDA device
//   auto r = (*backend)->ComputeGradient(params, batch, grad);
//
// Every call is synchronous: the parameters and inputs are read from host
// memory during the call and the gradient is in `grad` when it returns. The
// parameters are uploaded and the gradient downloaded on every call (the
// interface takes host spans), so at large widths a step is bound by the
// host<->device copies rather than by the GEMMs. Inside one call the uploads
// of later layers overlap the forward pass of earlier ones, and the gradient
// download overlaps the backward pass (one compute stream, one copy stream,
// events between them). The resident model (model/backend.h LoadModel ..
// ReadResidual; cuda_resident_model.h) avoids both: the model, the gradient
// sum and the 1-bit residual stay in device memory, a step uploads only its
// batch, and a push downloads only its 1-bit bytes (or the average).
//
// Numerics: weights, activations and gradients are stored in fp32. In
// MathMode::kTf32 (the default) cuBLAS rounds GEMM inputs to TF32 (10-bit
// mantissa) and accumulates in fp32: results match the CPU backend to about
// 1e-3 relative. MathMode::kFp32 keeps full fp32 GEMMs (about 1e-6 relative).
// Discrete choices (a ReLU at 0, a pooling window's maximum, a cell at its
// clip, the argmax of two nearly equal logits) follow the same rules as on
// the CPU but can fall the other way when two values are within rounding.
//
// Errors: every CUDA and cuBLAS failure comes back as an absl::Status naming
// the call and the CUDA/cuBLAS error; nothing aborts the process. After an
// error the instance should be discarded.
//
// Verification. The CPU-vs-CUDA tests (cuda_backend_test.cc,
// cuda_conv_test.cc, cuda_lstm_test.cc) run where a device is present and
// skip elsewhere. They passed in full on an H100 (one GPU, CUDA 13.0:
// cuda_backend_test 23 test cases, cuda_conv_test 9, cuda_lstm_test 5),
// and cuda_resident_test (the resident model against the host reference,
// 2 test cases then) passed on an H200; its pinned-buffer case has not yet
// run on a device. Together they cover the kernel launches (cuda_exec.cuh),
// the reduction kernels (cuda_kernels.cu: softmax with cross-entropy,
// argmax, column and channel sums), the cuBLAS calls, the streams and events of this file, and device
// memory handling. Without a device, layer_impl_test.cc still runs every
// layer's steps (dense_impl.h, conv_impl.h, lstm_impl.h: every index, every
// element-wise op, every GEMM in the column-major form handed to cuBLAS)
// on the CPU against model/layers/; the device code is then only compiled.
// The soft targets (loss_impl_test), multi-frame heads and the device replay
// of delta pulls (replay_impl_test; the worker's copies on the device,
// --replay_on_device) were added after the last GPU run: their GPU cases
// (cuda_backend_test's taught and multi-frame cases, cuda_replay_test) have
// not yet run on a device.
//
// Thread-safety: a backend instance owns device buffers, streams and a
// cuBLAS handle; use it from one thread at a time (one instance per worker
// thread), except CreateExactCopy, which any thread may call: it makes a
// DeviceExactCopy (cuda_replay.h) on the backend's device, with its own
// memory and stream, for the parameter client's pull threads. The free
// functions below are thread-safe.
//
// This header includes no CUDA header, so code built without nvcc can use it.
#ifndef ASGD_MODEL_CUDA_CUDA_BACKEND_H_
#define ASGD_MODEL_CUDA_CUDA_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/backend.h"
#include "model/cuda/cuda_options.h"
#include "model/model_spec.h"

namespace asgd {

// OK when at least one CUDA device is usable; otherwise kUnavailable with the
// reason, e.g. "no CUDA device: cudaGetDeviceCount returned
// cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA
// runtime version)". Never aborts, also when no driver is installed.
absl::Status CudaDeviceStatus();

// CudaDeviceStatus().ok().
bool CudaDeviceAvailable();

// The device's name, e.g. "NVIDIA H100 80GB HBM3". kUnavailable without a
// device, InvalidArgument for an ordinal out of range.
absl::StatusOr<std::string> CudaDeviceName(int device);

// Creates the CUDA backend on options.device with buffers for batches of up
// to `max_batch` rows, allocating all device and pinned host memory up front.
// Errors: InvalidArgument for a bad spec, max_batch < 1,
// options.conv_block_rows < 0, or a device ordinal out of range;
// kUnavailable when no CUDA device is present; kResourceExhausted when device
// or pinned memory runs out; kInternal for other CUDA/cuBLAS failures. name()
// of the result is "cuda".
absl::StatusOr<std::unique_ptr<ModelBackend>> CreateCudaBackend(
    const ModelSpec& spec, int max_batch, const CudaOptions& options = {});

}  // namespace asgd

#endif  // ASGD_MODEL_CUDA_CUDA_BACKEND_H_
