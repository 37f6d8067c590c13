#include "common/chunking.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/text_quote.h"

namespace asgd {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian float32; add byte swapping");

std::vector<ChunkRef> PlanChunks(const ModelLayout& layout, FlatRange range,
                                 int64_t max_elements) {
  std::vector<ChunkRef> chunks;
  for (const Slice& s : layout.SlicesOf(range)) {
    for (int64_t off = s.begin; off < s.end; off += max_elements) {
      const int64_t count = std::min(max_elements, s.end - off);
      chunks.push_back({s.tensor, off, s.flat_begin + (off - s.begin), count});
    }
  }
  return chunks;
}

void AppendFloats(const float* src, int64_t count, std::string* out) {
  const size_t old = out->size();
  out->resize(old + count * sizeof(float));
  std::memcpy(&(*out)[old], src, count * sizeof(float));
}

absl::string_view ChunkErrorName(ChunkError e) {
  switch (e) {
    case ChunkError::kNone: return "none";
    case ChunkError::kUnknownTensor: return "unknown_tensor";
    case ChunkError::kBadSize: return "bad_size";
    case ChunkError::kBadSequence: return "bad_sequence";
    case ChunkError::kNonFinite: return "nonfinite";
  }
  return "unknown";
}

ChunkSequence::ChunkSequence(const ModelLayout* layout, FlatRange range,
                             int64_t max_elements)
    : layout_(layout),
      range_begin_(range.begin),
      max_elements_(max_elements),
      slices_(layout->SlicesOf(range)) {
  if (!slices_.empty()) next_ = slices_[0].begin;
}

absl::Status ChunkSequence::Fail(ChunkError error, std::string message) {
  error_ = error;
  return absl::InvalidArgumentError(std::move(message));
}

absl::Status ChunkSequence::Tensor(absl::string_view name, int* tensor) {
  if (error_ != ChunkError::kNone) {
    return absl::InvalidArgumentError("chunk after an earlier error");
  }
  const int t = layout_->FindTensor(name);
  if (t < 0) {
    return Fail(ChunkError::kUnknownTensor,
                absl::StrCat("unknown tensor '", EscapeForMessage(name), "'"));
  }
  bool held = false;
  for (const Slice& s : slices_) held |= (s.tensor == t);
  if (!held) {
    return Fail(ChunkError::kUnknownTensor,
                absl::StrCat("tensor '", name,
                             "' has no elements on this server"));
  }
  *tensor = t;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ChunkSequence::Place(int t, absl::string_view name,
                                             uint64_t offset, int64_t count) {
  if (error_ != ChunkError::kNone) {
    return absl::InvalidArgumentError("chunk after an earlier error");
  }
  if (count > max_elements_) {
    return Fail(ChunkError::kBadSize,
                absl::StrCat("chunk of '", name, "' has ", count,
                             " elements, more than the limit ", max_elements_));
  }
  // Move to the next slice when the current one is complete.
  if (slice_ < slices_.size() && next_ == slices_[slice_].end) {
    ++slice_;
    if (slice_ < slices_.size()) next_ = slices_[slice_].begin;
  }
  if (slice_ >= slices_.size()) {
    return Fail(ChunkError::kBadSequence,
                absl::StrCat("chunk of '", name, "' at offset ", offset,
                             " after the server's whole slice was received"));
  }
  const Slice& s = slices_[slice_];
  if (t != s.tensor || static_cast<int64_t>(offset) != next_) {
    return Fail(ChunkError::kBadSequence,
                absl::StrCat("chunk of '", name, "' at offset ", offset,
                             " is out of sequence: expected '",
                             layout_->tensors()[s.tensor].name, "' at offset ",
                             next_));
  }
  if (count > s.end - next_) {
    return Fail(ChunkError::kBadSize,
                absl::StrCat("chunk of '", name, "' at offset ", offset,
                             " has ", count, " elements but only ",
                             s.end - next_, " remain in this server's slice"));
  }
  const int64_t at = s.flat_begin + (next_ - s.begin) - range_begin_;
  next_ += count;
  ++chunks_;
  return at;
}

absl::Status ChunkSequence::Finish(uint64_t declared_chunks) {
  if (error_ != ChunkError::kNone) {
    return absl::InvalidArgumentError("finish after an earlier error");
  }
  // Place() never leaves slice_ past the last slice, so completeness is
  // "on the last slice, at its end".
  const bool complete = slices_.empty() || (slice_ == slices_.size() - 1 &&
                                            next_ == slices_.back().end);
  if (!complete) {
    const Slice& s = slices_[slice_];
    return Fail(ChunkError::kBadSequence,
                absl::StrCat("incomplete: stopped at '",
                             layout_->tensors()[s.tensor].name, "' offset ",
                             next_, " before the end of this server's slice"));
  }
  if (declared_chunks != static_cast<uint64_t>(chunks_)) {
    return Fail(ChunkError::kBadSequence,
                absl::StrCat("sender declared ", declared_chunks,
                             " chunks but ", chunks_, " arrived"));
  }
  return absl::OkStatus();
}

ChunkAssembler::ChunkAssembler(const ModelLayout* layout, FlatRange range,
                               int64_t max_elements, float* dst,
                               bool check_finite)
    : sequence_(layout, range, max_elements),
      dst_(dst),
      check_finite_(check_finite) {}

absl::Status ChunkAssembler::Add(absl::string_view tensor, uint64_t offset,
                                 absl::Span<const absl::string_view> data,
                                 int dtype_value) {
  int t;
  if (absl::Status s = sequence_.Tensor(tensor, &t); !s.ok()) return s;
  if (!IsKnownWireDtype(dtype_value)) {
    return sequence_.Fail(
        ChunkError::kBadSize,
        absl::StrCat("chunk of '", tensor,
                     "' has an unknown element encoding (dtype ", dtype_value,
                     ")"));
  }
  const WireDtype dtype = static_cast<WireDtype>(dtype_value);
  const int width = WireBytes(dtype);
  size_t bytes = 0;
  for (absl::string_view piece : data) bytes += piece.size();
  if (bytes == 0 || bytes % width != 0) {
    return sequence_.Fail(
        ChunkError::kBadSize,
        absl::StrCat("chunk of '", tensor, "' has ", bytes,
                     " bytes, not a positive multiple of ", width, " (",
                     WireDtypeName(dtype), ")"));
  }
  const int64_t count = static_cast<int64_t>(bytes / width);
  absl::StatusOr<int64_t> at = sequence_.Place(t, tensor, offset, count);
  if (!at.ok()) return at.status();
  float* out = dst_ + *at;
  // Decode piece by piece; an element split between pieces goes through
  // `carry`.
  int64_t done = 0;  // elements written to out
  char carry[4];
  int carried = 0;  // bytes in carry
  int64_t bad = -1;
  for (absl::string_view piece : data) {
    if (piece.empty()) continue;  // (its data() may be null)
    if (carried > 0) {
      const size_t take = std::min<size_t>(width - carried, piece.size());
      std::memcpy(carry + carried, piece.data(), take);
      carried += static_cast<int>(take);
      piece.remove_prefix(take);
      if (carried < width) continue;
      if (DecodeFloats(carry, 1, dtype, out + done, check_finite_, &max_abs_) >=
          0) {
        bad = done;
        break;
      }
      ++done;
      carried = 0;
    }
    const int64_t whole = static_cast<int64_t>(piece.size() / width);
    const int64_t at_bad = DecodeFloats(piece.data(), whole, dtype, out + done,
                                        check_finite_, &max_abs_);
    if (at_bad >= 0) {
      bad = done + at_bad;
      break;
    }
    done += whole;
    piece.remove_prefix(whole * width);
    if (!piece.empty()) std::memcpy(carry, piece.data(), piece.size());
    carried = static_cast<int>(piece.size());
  }
  if (bad >= 0) {
    return sequence_.Fail(
        ChunkError::kNonFinite,
        absl::StrCat("non-finite value ", out[bad], " in '", tensor,
                     "' at element ", offset + bad));
  }
  return absl::OkStatus();
}

absl::Status ChunkAssembler::Finish(uint64_t declared_chunks) {
  return sequence_.Finish(declared_chunks);
}

}  // namespace asgd
