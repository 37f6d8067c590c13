// ResidentPush: the pushes of a worker whose backend holds the model and
// sums the gradients itself (the resident model of model/backend.h: a CUDA
// backend keeps both in device memory). Nothing model-sized crosses to the
// host per minibatch; per push, Take moves the backend's sum out:
//  * 1-bit gradient pushes: encoded on the backend, with its own error
//    feedback residual, by the plan of the client's encoder
//    (PushEncoder::one_bit_plan: the chunks and groups a host push uses),
//    so only the encoded bytes come down; Send hands each server its part
//    (PushEncoded); a part a server did not apply goes back into the
//    backend's residual (Restore), as the client's encoder does with its
//    own residual for a host push;
//  * top-k gradient pushes likewise, by PushEncoder::top_k_plan (the
//    chunks and k of a host push): the backend selects the entries with
//    its residual and only they come down (TakeTopK); a part no server
//    applied goes back into the residual;
//  * bfloat16 gradient pushes: the average rounded to bfloat16 on the
//    backend (TakeBf16), so half the bytes of float32 come down and the
//    host does no conversion pass; Send hands each server its chunks
//    (PushEncoder::SplitBf16, PushEncoded), copied to the wire as they are;
//  * float32: the average comes down as float32 and the client sends it as
//    it does a host gradient (Push).
//
//   ResidentPush push(backend, client);
//   RETURN_IF_ERROR(push.Take(n));                  // worker's thread
//   StatusOr<PushOutcome> o = push.Send(versions, n);  // any thread
//   RETURN_IF_ERROR(push.Restore());  // worker's thread, after Send returned
//
// Thread-safety: Take and Restore on the thread that uses the backend;
// Send on any one thread between them (it touches neither the backend nor
// what Take may write next).
#ifndef ASGD_WORKER_PS_RESIDENT_PUSH_H_
#define ASGD_WORKER_PS_RESIDENT_PUSH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/backend.h"
#include "worker/ps/encoded_push.h"
#include "worker/ps/param_client.h"

namespace asgd {

class ResidentPush {
 public:
  // Both must outlive this.
  ResidentPush(ModelBackend* backend, ParamClient* client);

  // True when pushes are encoded on the backend (1-bit, top-k or bfloat16
  // gradient pushes, and a client that says how: ParamClient::push_encoder).
  bool encodes() const { return encoder_ != nullptr; }

  // Moves the backend's sum of `num_minibatches` minibatches (their average)
  // into the next push; the backend's sum is cleared. The backend's errors
  // (a NaN or Inf in the encoded values is InvalidArgument).
  absl::Status Take(int num_minibatches);

  // Sends what Take prepared, computed from the model of `versions`: the
  // first server's error, else the servers' replies summed up
  // (SumUpPushReplies).
  absl::StatusOr<PushOutcome> Send(const std::vector<uint64_t>& versions,
                                   int num_minibatches);

  // After Send: the parts no server applied go back into the backend's
  // residual (1-bit and top-k; nothing to do otherwise).
  absl::Status Restore();

 private:
  ModelBackend* const backend_;
  ParamClient* const client_;
  const PushEncoder* encoder_ = nullptr;  // null: float32 pushes
  std::vector<char> bytes_;               // the backend's 1-bit encoding
  std::vector<uint16_t> bf16_;            // the backend's bfloat16 average
  std::vector<ServerPush> parts_;         // bytes_ cut per server
  std::vector<int> unapplied_;            // servers that did not apply
  std::vector<float> average_;            // float pushes
};

}  // namespace asgd

#endif  // ASGD_WORKER_PS_RESIDENT_PUSH_H_
