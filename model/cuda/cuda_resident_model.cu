#include "model/cuda/cuda_resident_model.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compression/grad_codec.h"
#include "model/cuda/cuda_resident.h"

namespace asgd {
namespace cuda {
namespace {

// Host<->device pieces: 4 MiB of floats.
constexpr int64_t kPieceFloats = int64_t{1} << 20;

void PutU32(uint32_t v, char* p) {
  for (int b = 0; b < 4; ++b) p[b] = static_cast<char>((v >> (8 * b)) & 0xff);
}

// The 16-byte grad_codec header of a one-bit chunk.
void WriteOneBitHeader(const OneBitChunkPlan& c, char* p) {
  p[0] = static_cast<char>(GradEncoding::kOneBit);
  p[1] = static_cast<char>(kGradCodecVersion);
  p[2] = p[3] = 0;
  PutU32(static_cast<uint32_t>(c.count), p + 4);
  PutU32(static_cast<uint32_t>(c.group_size), p + 8);
  PutU32(static_cast<uint32_t>(c.first_group), p + 12);
}

bool SameTopKPlan(const TopKPlan& a, const TopKPlan& b) {
  if (a.chunks.size() != b.chunks.size()) return false;
  for (size_t c = 0; c < a.chunks.size(); ++c) {
    const TopKChunkPlan& x = a.chunks[c];
    const TopKChunkPlan& y = b.chunks[c];
    if (x.flat_begin != y.flat_begin || x.count != y.count || x.k != y.k) {
      return false;
    }
  }
  return true;
}

// Elements per tile of the top-k counting and emitting threads.
constexpr int64_t kTopKTile = 256;

bool SamePlan(const OneBitPlan& a, const OneBitPlan& b) {
  if (a.chunks.size() != b.chunks.size() || a.total_bytes != b.total_bytes) {
    return false;
  }
  for (size_t c = 0; c < a.chunks.size(); ++c) {
    const OneBitChunkPlan& x = a.chunks[c];
    const OneBitChunkPlan& y = b.chunks[c];
    if (x.flat_begin != y.flat_begin || x.count != y.count ||
        x.group_size != y.group_size || x.first_group != y.first_group) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ResidentModel>> ResidentModel::Create(
    int64_t num_params, cudaStream_t stream) {
  std::unique_ptr<ResidentModel> m(new ResidentModel(num_params, stream));
  ASGD_ASSIGN_OR_RETURN(m->model_, DeviceBuffer<float>::Create(num_params));
  ASGD_ASSIGN_OR_RETURN(m->sum_, DeviceBuffer<float>::Create(num_params));
  ASGD_ASSIGN_OR_RETURN(m->residual_, DeviceBuffer<float>::Create(num_params));
  ASGD_ASSIGN_OR_RETURN(m->flag_, DeviceBuffer<int>::Create(1));
  ASGD_ASSIGN_OR_RETURN(m->host_flag_, PinnedHostBuffer<int>::Create(1));
  ASGD_ASSIGN_OR_RETURN(m->staging_,
                        PinnedHostBuffer<float>::Create(2 * kPieceFloats));
  for (Event& e : m->piece_done_) {
    ASGD_ASSIGN_OR_RETURN(e, CreateEvent());
  }
  const size_t bytes = static_cast<size_t>(num_params) * sizeof(float);
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m->sum_.get(), 0, bytes, stream));
  ASGD_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(m->residual_.get(), 0, bytes, stream));
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return m;
}

ResidentModel::~ResidentModel() {
  for (const float* p : pinned_) cudaHostUnregister(const_cast<float*>(p));
}

absl::Status ResidentModel::Pin(absl::Span<const float> buffer) {
  if (std::find(pinned_.begin(), pinned_.end(), buffer.data()) !=
      pinned_.end()) {
    return absl::OkStatus();
  }
  ASGD_CUDA_RETURN_IF_ERROR(cudaHostRegister(
      const_cast<float*>(buffer.data()), buffer.size() * sizeof(float),
      cudaHostRegisterDefault));
  pinned_.push_back(buffer.data());
  return absl::OkStatus();
}

void ResidentModel::Unpin(absl::Span<const float> buffer) {
  auto it = std::find(pinned_.begin(), pinned_.end(), buffer.data());
  if (it == pinned_.end()) return;
  cudaHostUnregister(const_cast<float*>(*it));
  pinned_.erase(it);
}

absl::Status ResidentModel::Load(absl::Span<const float> params) {
  loaded_ = false;
  if (std::find(pinned_.begin(), pinned_.end(), params.data()) !=
      pinned_.end()) {
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        model_.get(), params.data(), num_params_ * sizeof(float),
        cudaMemcpyHostToDevice, stream_));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    loaded_ = true;
    return absl::OkStatus();
  }
  int slot = 0;
  for (int64_t begin = 0; begin < num_params_; begin += kPieceFloats) {
    const int64_t count = std::min(kPieceFloats, num_params_ - begin);
    float* piece = staging_.get() + slot * kPieceFloats;
    // The slot's previous upload must have left before it is refilled.
    ASGD_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(piece_done_[slot].get()));
    std::memcpy(piece, params.data() + begin, count * sizeof(float));
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(model_.get() + begin, piece, count * sizeof(float),
                        cudaMemcpyHostToDevice, stream_));
    ASGD_CUDA_RETURN_IF_ERROR(
        cudaEventRecord(piece_done_[slot].get(), stream_));
    slot = 1 - slot;
  }
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  loaded_ = true;
  return absl::OkStatus();
}

absl::Status ResidentModel::LoadFromDevice(const float* params) {
  loaded_ = false;
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(model_.get(), params,
                                            num_params_ * sizeof(float),
                                            cudaMemcpyDeviceToDevice, stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  loaded_ = true;
  return absl::OkStatus();
}

absl::StatusOr<bool> ResidentModel::Accumulate(const float* grad) {
  ASGD_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(flag_.get(), 0, sizeof(int), stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchFlagNonFinite(
      grad, num_params_, flag_.get(), stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchAddUnlessFlagged(
      grad, num_params_, flag_.get(), sum_.get(), stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_flag_.get(), flag_.get(),
                                            sizeof(int), cudaMemcpyDeviceToHost,
                                            stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  const bool finite = *host_flag_.get() == 0;
  if (finite) ++accumulated_;
  return finite;
}

absl::Status ResidentModel::ClearSum() {
  accumulated_ = 0;
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
      sum_.get(), 0, static_cast<size_t>(num_params_) * sizeof(float),
      stream_));
  return absl::OkStatus();
}

absl::Status ResidentModel::Download(const void* src, int64_t bytes,
                                     void* dst) {
  // Piece p goes down into slot p % 2 while the host copies piece p - 1 out.
  constexpr int64_t kPieceBytes = kPieceFloats * sizeof(float);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  char* staging = reinterpret_cast<char*>(staging_.get());
  int64_t previous = -1;
  int slot = 0;
  for (int64_t begin = 0;; begin += kPieceBytes) {
    if (begin < bytes) {
      const int64_t n = std::min(kPieceBytes, bytes - begin);
      ASGD_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(staging + slot * kPieceBytes, from + begin, n,
                          cudaMemcpyDeviceToHost, stream_));
      ASGD_CUDA_RETURN_IF_ERROR(
          cudaEventRecord(piece_done_[slot].get(), stream_));
    }
    if (previous >= 0) {
      const int prev_slot = 1 - slot;
      ASGD_CUDA_RETURN_IF_ERROR(
          cudaEventSynchronize(piece_done_[prev_slot].get()));
      const int64_t n = std::min(kPieceBytes, bytes - previous);
      std::memcpy(to + previous, staging + prev_slot * kPieceBytes, n);
    }
    if (begin >= bytes) break;
    previous = begin;
    slot = 1 - slot;
  }
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status ResidentModel::TakeAverage(float* scratch,
                                        absl::Span<float> out) {
  const float scale = accumulated_ > 0 ? 1.0f / accumulated_ : 0.0f;
  ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchScale(
      sum_.get(), num_params_, scale, scratch, stream_));
  ASGD_RETURN_IF_ERROR(ClearSum());
  return Download(scratch, num_params_ * sizeof(float), out.data());
}

absl::Status ResidentModel::TakeBf16(float* scratch,
                                     absl::Span<uint16_t> out) {
  const float scale = accumulated_ > 0 ? 1.0f / accumulated_ : 0.0f;
  // num_params bfloat16 values fit in the float scratch (half of it).
  uint16_t* bf16 = reinterpret_cast<uint16_t*>(scratch);
  ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchScaleToBf16(
      sum_.get(), num_params_, scale, bf16, stream_));
  ASGD_RETURN_IF_ERROR(ClearSum());
  return Download(bf16, num_params_ * sizeof(uint16_t), out.data());
}

absl::Status ResidentModel::PreparePlan(const OneBitPlan& plan) {
  if (groups_.get() != nullptr && SamePlan(plan, plan_)) {
    return absl::OkStatus();
  }
  std::vector<cuda_kernels::OneBitGroupJob> groups;
  std::vector<cuda_kernels::OneBitChunkJob> chunks;
  cuda_kernels::OneBitJobs(plan, &groups, &chunks);
  if (groups.size() >
      static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TakeOneBit: a plan of ", groups.size(), " groups; at most 2^31 - 1"));
  }
  plan_ = OneBitPlan();
  ASGD_ASSIGN_OR_RETURN(
      groups_, DeviceBuffer<cuda_kernels::OneBitGroupJob>::Create(
                   static_cast<int64_t>(groups.size())));
  ASGD_ASSIGN_OR_RETURN(
      chunks_, DeviceBuffer<cuda_kernels::OneBitChunkJob>::Create(
                   static_cast<int64_t>(chunks.size())));
  ASGD_ASSIGN_OR_RETURN(bytes_, DeviceBuffer<char>::Create(plan.total_bytes));
  ASGD_ASSIGN_OR_RETURN(host_bytes_,
                        PinnedHostBuffer<char>::Create(plan.total_bytes));
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      groups_.get(), groups.data(), groups.size() * sizeof(groups[0]),
      cudaMemcpyHostToDevice, stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      chunks_.get(), chunks.data(), chunks.size() * sizeof(chunks[0]),
      cudaMemcpyHostToDevice, stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  max_chunk_count_ = 0;
  for (const OneBitChunkPlan& c : plan.chunks) {
    max_chunk_count_ = std::max(max_chunk_count_, c.count);
  }
  plan_ = plan;
  return absl::OkStatus();
}

absl::Status ResidentModel::TakeOneBit(const OneBitPlan& plan, float* scratch,
                                       absl::Span<char> out) {
  ASGD_RETURN_IF_ERROR(PreparePlan(plan));
  const float scale = accumulated_ > 0 ? 1.0f / accumulated_ : 0.0f;
  ASGD_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(flag_.get(), 0, sizeof(int), stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchOneBitEncode(
      groups_.get(), groups_.size(), chunks_.get(),
      static_cast<int>(chunks_.size()), max_chunk_count_, sum_.get(), scale,
      residual_.get(), scratch, bytes_.get(), flag_.get(), stream_));
  ASGD_RETURN_IF_ERROR(ClearSum());
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_flag_.get(), flag_.get(),
                                            sizeof(int), cudaMemcpyDeviceToHost,
                                            stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_bytes_.get(), bytes_.get(),
                                            plan.total_bytes,
                                            cudaMemcpyDeviceToHost, stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (*host_flag_.get() != 0) {
    return absl::InvalidArgumentError(
        "TakeOneBit: the averaged gradient plus the residual has a NaN or "
        "Inf; nothing was encoded");
  }
  char* bytes = host_bytes_.get();
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    WriteOneBitHeader(plan.chunks[c], bytes + plan.offsets[c]);
  }
  std::memcpy(out.data(), bytes, plan.total_bytes);
  return absl::OkStatus();
}

absl::Status ResidentModel::PrepareTopKPlan(const TopKPlan& plan) {
  if (top_k_ready_ && SameTopKPlan(plan, top_k_plan_)) {
    return absl::OkStatus();
  }
  top_k_ready_ = false;
  const int64_t num_chunks = static_cast<int64_t>(plan.chunks.size());
  if (num_chunks > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TakeTopK: a plan of ", num_chunks, " chunks; at most 2^31 - 1"));
  }
  std::vector<cuda_ops::TopKChunkJob> jobs;
  int64_t entries = 0;
  for (const TopKChunkPlan& c : plan.chunks) {
    jobs.push_back({c.flat_begin, c.count, c.k, entries});
    entries += c.k;
  }
  const int64_t tiles = (plan.max_count() + kTopKTile - 1) / kTopKTile;
  ASGD_ASSIGN_OR_RETURN(
      top_k_jobs_, DeviceBuffer<cuda_ops::TopKChunkJob>::Create(num_chunks));
  ASGD_ASSIGN_OR_RETURN(
      top_k_state_, DeviceBuffer<cuda_ops::TopKChunkState>::Create(num_chunks));
  ASGD_ASSIGN_OR_RETURN(top_k_hist_, DeviceBuffer<uint32_t>::Create(
                                         num_chunks * cuda_ops::kTopKMaxBins));
  ASGD_ASSIGN_OR_RETURN(top_k_greater_,
                        DeviceBuffer<int64_t>::Create(num_chunks * tiles));
  ASGD_ASSIGN_OR_RETURN(top_k_equal_,
                        DeviceBuffer<int64_t>::Create(num_chunks * tiles));
  ASGD_ASSIGN_OR_RETURN(top_k_indices_,
                        DeviceBuffer<uint32_t>::Create(entries));
  ASGD_ASSIGN_OR_RETURN(top_k_values_, DeviceBuffer<float>::Create(entries));
  ASGD_ASSIGN_OR_RETURN(host_indices_,
                        PinnedHostBuffer<uint32_t>::Create(entries));
  ASGD_ASSIGN_OR_RETURN(host_values_, PinnedHostBuffer<float>::Create(entries));
  if (num_chunks > 0) {
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        top_k_jobs_.get(), jobs.data(), jobs.size() * sizeof(jobs[0]),
        cudaMemcpyHostToDevice, stream_));
    ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  }
  top_k_ = cuda_kernels::TopKTables{
      top_k_jobs_.get(),    static_cast<int>(num_chunks),
      plan.max_count(),     top_k_state_.get(),
      top_k_hist_.get(),    kTopKTile,
      tiles,                top_k_greater_.get(),
      top_k_equal_.get(),   top_k_indices_.get(),
      top_k_values_.get()};
  top_k_plan_ = plan;
  top_k_ready_ = true;
  return absl::OkStatus();
}

absl::Status ResidentModel::TakeTopK(const TopKPlan& plan, float* scratch,
                                     std::vector<std::string>* out) {
  ASGD_RETURN_IF_ERROR(PrepareTopKPlan(plan));
  const float scale = accumulated_ > 0 ? 1.0f / accumulated_ : 0.0f;
  ASGD_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(flag_.get(), 0, sizeof(int), stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchTopKEncode(
      top_k_, sum_.get(), scale, residual_.get(), scratch, flag_.get(),
      stream_));
  ASGD_RETURN_IF_ERROR(ClearSum());
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_flag_.get(), flag_.get(),
                                            sizeof(int), cudaMemcpyDeviceToHost,
                                            stream_));
  const int64_t entries = top_k_indices_.size();
  if (entries > 0) {
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        host_indices_.get(), top_k_indices_.get(), entries * sizeof(uint32_t),
        cudaMemcpyDeviceToHost, stream_));
    ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        host_values_.get(), top_k_values_.get(), entries * sizeof(float),
        cudaMemcpyDeviceToHost, stream_));
  }
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  const int flag = *host_flag_.get();
  if ((flag & cuda_ops::kTopKNonFinite) != 0) {
    return absl::InvalidArgumentError(
        "TakeTopK: the averaged gradient plus the residual has a NaN or Inf; "
        "nothing was encoded");
  }
  if (flag != 0) {
    return absl::InternalError(
        "TakeTopK: the device's selection counted other than k entries");
  }
  std::vector<std::string> chunks(plan.chunks.size());
  int64_t at = 0;
  for (size_t c = 0; c < plan.chunks.size(); ++c) {
    const TopKChunkPlan& p = plan.chunks[c];
    const absl::Status s = TopKChunkBytes(
        p.count, absl::MakeConstSpan(host_indices_.get() + at, p.k),
        absl::MakeConstSpan(host_values_.get() + at, p.k), &chunks[c]);
    if (!s.ok()) {
      return absl::InternalError(absl::StrCat(
          "TakeTopK: the device's entries of chunk ", c, ": ", s.message()));
    }
    at += p.k;
  }
  *out = std::move(chunks);
  return absl::OkStatus();
}

absl::Status ResidentModel::RestoreResidual(int64_t flat_begin,
                                            absl::Span<const float> values,
                                            float* scratch) {
  const int64_t count = static_cast<int64_t>(values.size());
  ASGD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scratch, values.data(),
                                            count * sizeof(float),
                                            cudaMemcpyHostToDevice, stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cuda_kernels::LaunchAdd(
      scratch, count, residual_.get() + flat_begin, stream_));
  ASGD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status ResidentModel::ReadResidual(absl::Span<float> out) {
  return Download(residual_.get(), num_params_ * sizeof(float), out.data());
}

}  // namespace cuda
}  // namespace asgd
