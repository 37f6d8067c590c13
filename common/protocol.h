// The version of asgd's parameter-server protocol (proto/asgd.proto,
// ModelDescription.protocol_version) that this build speaks, on both sides:
// a server reports it, and a client refuses a server that reports another.
//
//   2  pushes on PushStream and pulls on PullStream only (the per-call Push
//      and Pull RPCs are retired; a server answers them UNIMPLEMENTED).
//   1  (reported as 0: the field did not exist) per-call Push and Pull, and
//      the streams where ModelDescription.streams is true.
#ifndef ASGD_COMMON_PROTOCOL_H_
#define ASGD_COMMON_PROTOCOL_H_

#include <cstdint>

namespace asgd {

inline constexpr uint32_t kProtocolVersion = 2;

}  // namespace asgd

#endif  // ASGD_COMMON_PROTOCOL_H_
