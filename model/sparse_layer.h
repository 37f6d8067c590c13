// A dense layer's weight stored sparsely (compressed sparse rows) and its
// affine product, for decoding with pruned models (shrink/prune.h): only the
// non-zero weights are stored and multiplied.
//
//   SparseWeight w = SparseWeight::FromDense(weight, rows, cols);
//   SparseAffine(w, bias, h, frames, out);   // out = h W^T + bias
//
// Whether it pays depends on how frames are scored (bench/sparse_layer_bench
// measures it): one frame at a time the dense product is bound by reading the
// weight, and the sparse one reads only the non-zeros (4-byte value and
// 4-byte column each); for a batch of frames the dense product is one
// matrix-matrix multiplication at the machine's peak, which a sparse product
// matches only at high sparsity.
//
// The sparse product sums each output in column order, as a plain loop does;
// its results differ from the dense BLAS product's by rounding only
// (sparse_layer_test checks both against a double-precision sum).
//
// Thread-safety: a SparseWeight is immutable after FromDense; the functions
// are pure over caller-owned buffers.
#ifndef ASGD_MODEL_SPARSE_LAYER_H_
#define ASGD_MODEL_SPARSE_LAYER_H_

#include <cstdint>
#include <vector>

namespace asgd {

struct SparseWeight {
  int rows = 0, cols = 0;
  std::vector<int64_t> row_begin;  // rows + 1 offsets into col / value
  std::vector<int32_t> col;
  std::vector<float> value;

  // The non-zeros of a row-major rows x cols matrix (exact zeros dropped,
  // NaN kept as a non-zero).
  static SparseWeight FromDense(const float* weight, int rows, int cols);
  int64_t nonzeros() const { return static_cast<int64_t>(value.size()); }
  // Bytes of the stored values and column indices.
  int64_t bytes() const { return nonzeros() * 8 + (rows + 1) * 8; }
};

// out[f][r] = bias[r] + sum_k value[k] * h[f][col[k]] over row r's
// non-zeros, for `frames` frames: h is frames x cols, out frames x rows
// (row-major). Frames are taken in tiles whose inputs are transposed once,
// so every non-zero is read once per tile.
void SparseAffine(const SparseWeight& w, const float* bias, const float* h,
                  int64_t frames, float* out);

}  // namespace asgd

#endif  // ASGD_MODEL_SPARSE_LAYER_H_
