#include "common/model_layout.h"

#include <algorithm>
#include <cinttypes>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace asgd {

absl::StatusOr<ModelLayout> ModelLayout::Create(std::vector<TensorSpec> tensors,
                                                int num_servers,
                                                int num_shards,
                                                std::string model_id) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError("model has no tensors");
  }
  if (num_servers < 1 || num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pool shape must be at least 1x1, got num_servers=", num_servers,
        " num_shards=", num_shards));
  }
  ModelLayout layout;
  layout.model_id_ = std::move(model_id);
  absl::flat_hash_set<std::string> names;
  int64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    if (t.name.empty()) return absl::InvalidArgumentError("empty tensor name");
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate tensor name '", t.name, "'"));
    }
    if (t.shape.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "' has no shape"));
    }
    int64_t size = 1;
    for (int64_t d : t.shape) {
      if (d <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", t.name, "' has dimension ", d));
      }
      size *= d;
    }
    layout.sizes_.push_back(size);
    layout.offsets_.push_back(offset);
    offset += size;
  }
  layout.tensors_ = std::move(tensors);
  layout.total_size_ = offset;
  layout.num_servers_ = num_servers;
  layout.num_shards_ = num_shards;

  const int64_t global = int64_t{num_servers} * num_shards;
  layout.shard_bounds_.resize(global + 1);
  for (int64_t g = 0; g <= global; ++g) {
    int64_t b = offset * g / global;
    b = b / kShardAlignment * kShardAlignment;
    layout.shard_bounds_[g] = (g == global) ? offset : b;
  }
  return layout;
}

int ModelLayout::FindTensor(absl::string_view name) const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

FlatRange ModelLayout::ServerRange(int server) const {
  return {shard_bounds_[server * num_shards_],
          shard_bounds_[(server + 1) * num_shards_]};
}

FlatRange ModelLayout::ShardRange(int server, int shard) const {
  const int g = server * num_shards_ + shard;
  return {shard_bounds_[g], shard_bounds_[g + 1]};
}

std::vector<Slice> ModelLayout::SlicesOf(FlatRange range) const {
  std::vector<Slice> out;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const int64_t lo = std::max(range.begin, offsets_[t]);
    const int64_t hi = std::min(range.end, offsets_[t] + sizes_[t]);
    if (lo >= hi) continue;
    out.push_back(Slice{static_cast<int>(t), lo - offsets_[t],
                        hi - offsets_[t], lo});
  }
  return out;
}

std::string ModelLayout::Fingerprint() const {
  // FNV-1a over a canonical text form.
  std::string text = absl::StrCat(num_servers_, "x", num_shards_);
  if (!model_id_.empty()) absl::StrAppend(&text, "@", model_id_);
  for (const TensorSpec& t : tensors_) {
    absl::StrAppend(&text, ";", t.name, ":", absl::StrJoin(t.shape, ","));
  }
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

}  // namespace asgd
