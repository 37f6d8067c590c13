#include "worker/peer/peer_grpc_wire.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace asgd {

asgd::v1::PeerHello ToHello(const PeerGroup& group) {
  asgd::v1::PeerHello hello;
  hello.set_worker_index(group.worker_index);
  hello.set_num_workers(group.num_workers);
  hello.set_layout_fingerprint(group.layout_fingerprint);
  hello.set_mode(group.mode);
  hello.set_topology(group.topology);
  hello.set_topology_seed(group.topology_seed);
  return hello;
}

absl::Status CheckSameGroup(const PeerGroup& mine,
                            const asgd::v1::PeerHello& theirs) {
  auto differ = [&](absl::string_view what, const std::string& a,
                    const std::string& b) {
    return absl::FailedPreconditionError(absl::StrCat(
        "workers ", mine.worker_index, " and ", theirs.worker_index(),
        " disagree on ", what, " (", a, " vs ", b,
        "): start every worker of a group with the same flags"));
  };
  if (theirs.num_workers() != static_cast<uint32_t>(mine.num_workers)) {
    return differ("the number of workers", absl::StrCat(mine.num_workers),
                  absl::StrCat(theirs.num_workers()));
  }
  if (theirs.layout_fingerprint() != mine.layout_fingerprint) {
    return differ("the model", mine.layout_fingerprint,
                  theirs.layout_fingerprint());
  }
  if (theirs.mode() != mine.mode) {
    return differ("the mode", mine.mode, theirs.mode());
  }
  if (theirs.topology() != mine.topology) {
    return differ("the topology", mine.topology, theirs.topology());
  }
  if (theirs.topology_seed() != mine.topology_seed) {
    return differ("the topology seed", absl::StrCat(mine.topology_seed),
                  absl::StrCat(theirs.topology_seed()));
  }
  if (theirs.worker_index() >= theirs.num_workers()) {
    return absl::FailedPreconditionError(
        absl::StrCat("peer says it is worker ", theirs.worker_index(), " of ",
                     theirs.num_workers()));
  }
  return absl::OkStatus();
}

OutgoingTransfer::OutgoingTransfer(const ModelLayout* layout,
                                   asgd::v1::PeerHeader header, FlatRange range,
                                   const float* values,
                                   int64_t max_chunk_elements)
    : layout_(layout),
      header_(std::move(header)),
      range_(range),
      values_(values),
      chunks_(PlanChunks(*layout, range, max_chunk_elements)) {
  header_.set_begin(range.begin);
  header_.set_end(range.end);
}

void OutgoingTransfer::Fill(size_t i, asgd::v1::PeerMessage* msg) const {
  msg->Clear();
  if (i == 0) {
    *msg->mutable_header() = header_;
  } else if (i <= chunks_.size()) {
    const ChunkRef& c = chunks_[i - 1];
    auto* chunk = msg->mutable_chunk();
    chunk->set_tensor(layout_->tensors()[c.tensor].name);
    chunk->set_offset(c.offset);
    AppendFloats(values_ + (c.flat_begin - range_.begin), c.count,
                 chunk->mutable_data());
  } else {
    msg->mutable_commit()->set_num_chunks(chunks_.size());
  }
}

IncomingTransfer::IncomingTransfer(const ModelLayout* layout,
                                   int64_t max_chunk_elements, Expect expect)
    : layout_(layout),
      max_chunk_elements_(max_chunk_elements),
      expect_(std::move(expect)) {}

absl::Status IncomingTransfer::Fail(absl::Status status) {
  error_ = status;
  return status;
}

absl::Status IncomingTransfer::Add(const asgd::v1::PeerMessage& msg) {
  if (!error_.ok()) return error_;
  if (committed_) {
    return Fail(absl::InvalidArgumentError("message after the commit"));
  }
  switch (msg.part_case()) {
    case asgd::v1::PeerMessage::kHeader: {
      if (have_header_) {
        return Fail(absl::InvalidArgumentError("second transfer header"));
      }
      header_ = msg.header();
      have_header_ = true;
      absl::StatusOr<FlatRange> range = expect_(header_);
      if (!range.ok()) return Fail(range.status());
      if (header_.begin() != static_cast<uint64_t>(range->begin) ||
          header_.end() != static_cast<uint64_t>(range->end)) {
        return Fail(absl::InvalidArgumentError(absl::StrCat(
            "transfer covers [", header_.begin(), ", ", header_.end(),
            ") but [", range->begin, ", ", range->end, ") was expected")));
      }
      values_.assign(range->size(), 0.0f);
      assembler_.emplace(layout_, *range, max_chunk_elements_, values_.data(),
                         /*check_finite=*/true);
      return absl::OkStatus();
    }
    case asgd::v1::PeerMessage::kChunk: {
      if (!have_header_) {
        return Fail(absl::InvalidArgumentError("chunk before the header"));
      }
      const auto& c = msg.chunk();
      absl::Status s = assembler_->Add(c.tensor(), c.offset(), c.data());
      if (!s.ok()) return Fail(s);
      return absl::OkStatus();
    }
    case asgd::v1::PeerMessage::kCommit: {
      if (!have_header_) {
        return Fail(absl::InvalidArgumentError("commit before the header"));
      }
      absl::Status s = assembler_->Finish(msg.commit().num_chunks());
      if (!s.ok()) return Fail(s);
      committed_ = true;
      return absl::OkStatus();
    }
    case asgd::v1::PeerMessage::PART_NOT_SET:
      break;
  }
  return Fail(absl::InvalidArgumentError("empty transfer message"));
}

}  // namespace asgd
