#include "bench/tcp_loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace asgd::bench {
namespace {

absl::Status Errno(const char* what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Writes all of [data, data + n). MSG_NOSIGNAL: a closed peer is an error, not
// SIGPIPE.
absl::Status WriteAll(int fd, const char* data, int64_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, static_cast<size_t>(n), MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("send");
    }
    data += w;
    n -= w;
  }
  return absl::OkStatus();
}

// Reads exactly n bytes. OutOfRange on a clean end of stream before any byte.
absl::Status ReadAll(int fd, char* data, int64_t n) {
  const int64_t want = n;
  while (n > 0) {
    const ssize_t r = ::recv(fd, data, static_cast<size_t>(n), 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Errno("recv");
    }
    if (r == 0) {
      return n == want ? absl::OutOfRangeError("end of stream")
                       : absl::DataLossError("stream ended mid-payload");
    }
    data += r;
    n -= r;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpLoopback>> TcpLoopback::Start(
    int connections, int64_t payload, const char* client_send,
    const char* server_send, std::vector<char*> client_recv,
    std::vector<char*> server_recv) {
  auto t = std::unique_ptr<TcpLoopback>(
      new TcpLoopback(payload, client_send, server_send,
                      std::move(client_recv), std::move(server_recv)));
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return Errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
          0 ||
      ::listen(listener, connections) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) !=
          0) {
    absl::Status s = Errno("bind/listen");
    ::close(listener);
    return s;
  }
  absl::Status status;
  for (int c = 0; c < connections && status.ok(); ++c) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr),
                            sizeof(addr)) != 0) {
      status = Errno("connect");
      if (fd >= 0) ::close(fd);
      break;
    }
    const int peer = ::accept(listener, nullptr, nullptr);
    if (peer < 0) {
      status = Errno("accept");
      ::close(fd);
      break;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    t->client_fds_.push_back(fd);
    t->servers_.emplace_back(
        [raw = t.get(), peer, c] { raw->Serve(peer, c); });
  }
  ::close(listener);
  if (!status.ok()) return status;
  return t;
}

TcpLoopback::TcpLoopback(int64_t payload, const char* client_send,
                         const char* server_send,
                         std::vector<char*> client_recv,
                         std::vector<char*> server_recv)
    : payload_(payload),
      client_send_(client_send),
      server_send_(server_send),
      client_recv_(std::move(client_recv)),
      server_recv_(std::move(server_recv)) {}

TcpLoopback::~TcpLoopback() {
  for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);
  for (std::thread& t : servers_) t.join();
  for (int fd : client_fds_) ::close(fd);
}

absl::Status TcpLoopback::RoundTrip(int c) {
  if (absl::Status s = WriteAll(client_fds_[c], client_send_, payload_);
      !s.ok()) {
    return s;
  }
  return ReadAll(client_fds_[c], client_recv_[c], payload_);
}

void TcpLoopback::Serve(int fd, int c) {
  while (ReadAll(fd, server_recv_[c], payload_).ok() &&
         WriteAll(fd, server_send_, payload_).ok()) {
  }
  ::close(fd);
}

}  // namespace asgd::bench
