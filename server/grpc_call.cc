#include "server/grpc_call.h"

#include "common/refusal.h"
#include "common/tensor_wire.h"
#include "proto/asgd.pb.h"
#include "server/grpc_service.h"

namespace asgd {

RejectReason AdmissionReason(const absl::Status& refusal) {
  return RefusalOf(refusal) == Refusal::kServerLimit
             ? RejectReason::kServerLimit
             : RejectReason::kPeerLimit;
}

bool NextPullBuffer(PullWriter* writer, grpc::ByteBuffer* buffer) {
  PullPart m;
  if (!writer->Next(&m)) return false;
  switch (m.kind) {
    case PullPart::Kind::kChunk:
      *buffer =
          EncodeChunkMessage(ChunkMessageKind::kPull, m.model_version, m.tensor,
                             m.offset, m.dtype, m.count, m.fill);
      break;
    case PullPart::Kind::kExactChunk:
      *buffer = EncodeExactPullChunk(m.model_version, m.tensor, m.offset,
                                     m.dtype_value, m.data_bytes, m.fill);
      break;
    case PullPart::Kind::kUpdateHeader: {
      asgd::v1::DeltaUpdate header;
      header.set_version(m.update_version);
      header.set_learning_rate(m.learning_rate);
      header.set_weight_decay(m.weight_decay);
      header.set_num_chunks(m.num_chunks);
      *buffer = EncodeDeltaUpdateHeader(m.model_version, header);
      break;
    }
    case PullPart::Kind::kEndOfPull:
      *buffer =
          EncodeEndOfPull(m.model_version, m.num_chunks, m.exact, m.lineage);
      break;
  }
  return true;
}

grpc::ByteBuffer PushReplyOf(const PushResult& r) {
  asgd::v1::PushReply reply;
  reply.set_result(r.applied ? asgd::v1::PushReply::APPLIED
                             : asgd::v1::PushReply::DROPPED_STALE);
  reply.set_staleness(r.staleness);
  reply.set_model_version(r.version);
  reply.set_pull_required(!r.applied);
  return SerializeToByteBuffer(reply);
}

absl::Status StreamEnd(const GrpcParameterService* service) {
  if (service->shutting_down()) {
    return absl::UnavailableError("server shutting down");
  }
  return absl::OkStatus();  // idle for the stream idle timeout
}

}  // namespace asgd
