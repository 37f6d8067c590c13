// ModelLayout: a model's named tensors and how they are sharded.
//
// All tensors are laid end to end in one flat float32 vector (tensor order,
// each tensor row-major). That flat vector is cut into num_servers *
// num_shards contiguous ranges of near-equal size (boundaries aligned to
// kShardAlignment floats). Server process s owns global shards
// [s * num_shards, (s + 1) * num_shards), so a server's part of the model is
// one contiguous flat range, and each of its shards a contiguous sub-range.
// A Slice is the intersection of such a range with one tensor.
//
// Server and worker compute the same layout from the same tensor list, pool
// shape and model identity (an opaque string, e.g. a digest of the model's
// spec, so that two models with the same tensors but different math differ);
// Fingerprint() lets them check that they agree.
//
// Thread-safety: immutable after Create(); safe to share across threads.
#ifndef ASGD_COMMON_MODEL_LAYOUT_H_
#define ASGD_COMMON_MODEL_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace asgd {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// A contiguous piece [begin, end) of one flattened tensor.
struct Slice {
  int tensor = 0;         // index into ModelLayout::tensors()
  int64_t begin = 0;      // element offset inside the tensor
  int64_t end = 0;        // one past the last element
  int64_t flat_begin = 0; // offset of `begin` in the flat model vector
  int64_t size() const { return end - begin; }
};

// A contiguous range of the flat model vector.
struct FlatRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

class ModelLayout {
 public:
  static constexpr int64_t kShardAlignment = 16;

  // InvalidArgument for an empty tensor list, duplicate or empty names,
  // non-positive dimensions, or a pool shape below 1.
  static absl::StatusOr<ModelLayout> Create(std::vector<TensorSpec> tensors,
                                            int num_servers, int num_shards,
                                            std::string model_id = "");

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  int64_t tensor_size(int t) const { return sizes_[t]; }
  int64_t tensor_offset(int t) const { return offsets_[t]; }
  int64_t total_size() const { return total_size_; }
  int num_servers() const { return num_servers_; }
  int num_shards() const { return num_shards_; }

  // Index of the tensor named `name`, or -1.
  int FindTensor(absl::string_view name) const;

  // The flat range owned by server `server`, and by shard `shard` in it.
  FlatRange ServerRange(int server) const;
  FlatRange ShardRange(int server, int shard) const;

  // `range` cut at tensor boundaries, in flat order.
  std::vector<Slice> SlicesOf(FlatRange range) const;

  const std::string& model_id() const { return model_id_; }

  // A stable hex digest of tensor names, shapes, the pool shape and the
  // model identity.
  std::string Fingerprint() const;

 private:
  ModelLayout() = default;

  std::vector<TensorSpec> tensors_;
  std::string model_id_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> shard_bounds_;  // num_servers*num_shards + 1 entries
  int64_t total_size_ = 0;
  int num_servers_ = 0;
  int num_shards_ = 0;
};

}  // namespace asgd

#endif  // ASGD_COMMON_MODEL_LAYOUT_H_
