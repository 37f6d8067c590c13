#include "server/shard.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/wire_codec.h"
#include "step/add_apply.h"
#include "step/admm_apply.h"

namespace asgd {

bool UpdateCheck::Vote(bool ok, double local_max) {
  absl::MutexLock lock(&mu_);
  passed_ = passed_ && ok;
  max_ = std::max(max_, local_max);
  --waiting_;
  auto all_voted = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return waiting_ <= 0;
  };
  mu_.Await(absl::Condition(&all_voted));
  return passed_;
}

bool UpdateCheck::passed() const {
  absl::MutexLock lock(&mu_);
  return passed_;
}

double UpdateCheck::max() const {
  absl::MutexLock lock(&mu_);
  return max_;
}

Shard::Shard(int index, float* weights, int64_t local_begin, int64_t size,
             const Optimizer* optimizer, int queue_capacity,
             AppliedCallback on_applied, const uint8_t* keep,
             std::vector<float*> admm_slots, double admm_max_change)
    : index_(index),
      weights_(weights),
      local_begin_(local_begin),
      size_(size),
      optimizer_(optimizer),
      capacity_(queue_capacity),
      on_applied_(std::move(on_applied)),
      keep_(keep),
      admm_slots_(std::move(admm_slots)),
      admm_max_change_(admm_max_change),
      state_(optimizer->has_state() ? size : 0, 0.0f),
      max_w_(MaxAbs(weights, size)),
      thread_([this] { Run(); }) {}

Shard::~Shard() { Close(); }

bool Shard::TryEnqueue(ApplyTask task, bool control) {
  absl::MutexLock lock(&mu_);
  if (closed_ || (!control && queue_.size() >= capacity_)) return false;
  queue_.push_back(std::move(task));
  return true;
}

void Shard::Restore(const std::vector<float>& weights,
                    const std::vector<float>& state, uint64_t applied) {
  absl::MutexLock lock(&mu_);  // orders these writes before the next task
  std::copy_n(weights.data() + local_begin_, size_, weights_);
  if (!state_.empty() && !state.empty()) {
    std::copy_n(state.data() + local_begin_, size_, state_.data());
  }
  ResetAdmmSlots();
  max_w_.store(MaxAbs(weights_, size_), std::memory_order_release);
  max_v_.store(MaxAbs(state_.data(), state_.size()), std::memory_order_release);
  applied_.store(applied, std::memory_order_release);
}

void Shard::ResetAdmmSlots() {
  for (float* slot : admm_slots_) std::copy_n(weights_, size_, slot);
}

void Shard::ApplyAdmmTask(const ApplyTask& task) {
  const float* u = task.data->data() + local_begin_;
  float* slot = admm_slots_[task.admm_slot];
  const int slots = static_cast<int>(admm_slots_.size());
  const AdmmScan scan = ScanAdmm(weights_, u, slot, size_, slots, keep_);
  if (!task.check->Vote(scan.bounded, scan.max_delta)) return;
  // Every shard computes the same scale from the same largest step.
  const float scale = AdmmScale(task.check->max(), slots, admm_max_change_);
  max_w_.store(
      ApplyAdmm(weights_, u, slot, size_, slots, scale, keep_).max_abs_w,
      std::memory_order_release);
}

void Shard::Close() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Shard::ApplyCompressedTask(const CompressedGradient& g,
                                UpdateCheck* check, const UpdateContext& ctx) {
  const int64_t end = local_begin_ + size_;
  float* v = state_.empty() ? nullptr : state_.data();
  const bool apply =
      check == nullptr ||
      check->Vote(CompressedStaysBounded(*optimizer_, g.chunks, local_begin_,
                                         end, weights_, v, ctx));
  if (!apply) return;
  const ApplyStats stats = ApplyCompressedRange(*optimizer_, g.chunks,
                                                local_begin_, end, weights_, v,
                                                ctx);
  if (AppliesSparsely(*optimizer_, g.encoding)) {
    // Only the selected weights changed: the others are still within the
    // last maximum.
    const float before = max_w_.load(std::memory_order_relaxed);
    max_w_.store(std::max(before, stats.max_abs_w), std::memory_order_release);
  } else {
    max_w_.store(stats.max_abs_w, std::memory_order_release);
    max_v_.store(stats.max_abs_v, std::memory_order_release);
  }
}

void Shard::Run() {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || !queue_.empty();
  };
  for (;;) {
    ApplyTask task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // closed and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    if (task.kind == ApplyTask::Kind::kSnapshot) {
      SnapshotTarget& target = *task.snapshot;
      std::copy_n(weights_, size_, target.weights.data() + local_begin_);
      if (!state_.empty() && !target.state.empty()) {
        std::copy_n(state_.data(), size_, target.state.data() + local_begin_);
      }
      if (task.completion->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        task.completion->on_done();
      }
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    if (task.kind == ApplyTask::Kind::kAssign) {
      const float* data = task.data->data() + local_begin_;
      if (keep_ == nullptr) {
        std::copy(data, data + size_, weights_);
      } else {  // a pruned weight stays 0, never written otherwise
        for (int64_t i = 0; i < size_; ++i) {
          weights_[i] = keep_[i] != 0 ? data[i] : 0.0f;
        }
      }
      std::fill(state_.begin(), state_.end(), 0.0f);
      ResetAdmmSlots();
      max_w_.store(MaxAbs(weights_, size_), std::memory_order_release);
      max_v_.store(0.0f, std::memory_order_release);
    } else if (task.kind == ApplyTask::Kind::kAdmm) {
      ApplyAdmmTask(task);
    } else if (task.kind == ApplyTask::Kind::kAdd) {
      const float* data = task.data->data() + local_begin_;
      const bool apply =
          task.check == nullptr ||
          task.check->Vote(
              AddStaysBounded(weights_, data, size_, task.scale, keep_));
      if (apply) {
        max_w_.store(ApplyAdd(weights_, data, size_, task.scale, keep_).max_abs_w,
                     std::memory_order_release);
      }
    } else {
      UpdateContext ctx;
      ctx.scale = task.scale;
      ctx.step = applied_.load(std::memory_order_relaxed);
      ctx.keep = keep_;
      if (task.backup != nullptr) ctx.backup = task.backup->data() + local_begin_;
      if (task.compressed != nullptr) {
        ApplyCompressedTask(*task.compressed, task.check.get(), ctx);
      } else {
        const float* data = task.data->data() + local_begin_;
        const bool apply = task.check == nullptr ||
                           task.check->Vote(optimizer_->StaysBounded(
                               weights_, state_.data(), data, size_, ctx));
        if (apply) {
          const ApplyStats stats =
              optimizer_->Apply(weights_, state_.data(), data, size_, ctx);
          max_w_.store(stats.max_abs_w, std::memory_order_release);
          max_v_.store(stats.max_abs_v, std::memory_order_release);
        }
      }
    }
    applied_.fetch_add(1, std::memory_order_acq_rel);
    if (on_applied_) {
      on_applied_(index_, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count());
    }
    if (task.completion &&
        task.completion->remaining.fetch_sub(1, std::memory_order_acq_rel) ==
            1) {
      task.completion->on_done();
    }
  }
}

}  // namespace asgd
