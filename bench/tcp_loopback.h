// TcpLoopback: the raw-TCP baseline that transport_bench compares gRPC with:
// S loopback connections (TCP_NODELAY), each echoing a payload: the client
// writes P bytes, the server side reads all P and then writes P bytes back.
//
//   auto loop = TcpLoopback::Start(4, 1 << 20, send, reply, client_bufs,
//                                  server_bufs);
//   ... (*loop)->RoundTrip(c) from connection c's thread ...
//
// Thread-safety: RoundTrip(c) for different c may run concurrently, one
// thread per connection. The destructor shuts the connections down and joins
// the server threads.
#ifndef ASGD_BENCH_TCP_LOOPBACK_H_
#define ASGD_BENCH_TCP_LOOPBACK_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace asgd::bench {

class TcpLoopback {
 public:
  // `client_recv` and `server_recv` hold one P-byte buffer per connection;
  // `client_send` and `server_send` are P bytes shared by all. All must
  // outlive the object.
  static absl::StatusOr<std::unique_ptr<TcpLoopback>> Start(
      int connections, int64_t payload, const char* client_send,
      const char* server_send, std::vector<char*> client_recv,
      std::vector<char*> server_recv);
  ~TcpLoopback();

  // One iteration on connection `c`: send P bytes, receive P bytes back.
  absl::Status RoundTrip(int c);

 private:
  TcpLoopback(int64_t payload, const char* client_send, const char* server_send,
              std::vector<char*> client_recv, std::vector<char*> server_recv);
  void Serve(int fd, int c);

  const int64_t payload_;
  const char* const client_send_;
  const char* const server_send_;
  const std::vector<char*> client_recv_;
  const std::vector<char*> server_recv_;
  std::vector<int> client_fds_;
  std::vector<std::thread> servers_;
};

}  // namespace asgd::bench

#endif  // ASGD_BENCH_TCP_LOOPBACK_H_
