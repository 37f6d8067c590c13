#include "common/tensor_messages.h"

namespace asgd {
namespace {

TensorChunkView ViewOfChunk(const asgd::v1::TensorChunk& c) {
  TensorChunkView view;
  view.tensor = c.tensor();
  view.offset = c.offset();
  view.dtype = static_cast<int>(c.dtype());
  if (!c.data().empty()) view.data.push_back(c.data());
  return view;
}

}  // namespace

PushMessage ViewOf(const asgd::v1::PushChunk& msg) {
  PushMessage out;
  out.model_version = msg.model_version();
  switch (msg.part_case()) {
    case asgd::v1::PushChunk::kHeader:
      out.part = PushMessage::Part::kHeader;
      out.header = msg.header();
      break;
    case asgd::v1::PushChunk::kChunk:
      out.part = PushMessage::Part::kChunk;
      out.chunk = ViewOfChunk(msg.chunk());
      break;
    case asgd::v1::PushChunk::kCommit:
      out.part = PushMessage::Part::kCommit;
      out.commit_chunks = msg.commit().num_chunks();
      break;
    case asgd::v1::PushChunk::PART_NOT_SET:
      break;
  }
  return out;
}

PullMessage ViewOf(const asgd::v1::PullChunk& msg) {
  PullMessage out;
  out.model_version = msg.model_version();
  out.has_chunk = msg.has_chunk();
  if (out.has_chunk) out.chunk = ViewOfChunk(msg.chunk());
  out.end_of_pull = msg.end_of_pull();
  out.num_chunks = msg.num_chunks();
  out.has_update = msg.has_update();
  if (out.has_update) out.update = msg.update();
  out.exact = msg.exact();
  out.lineage = msg.lineage();
  return out;
}

}  // namespace asgd
