// Helpers for tests that run the real asgd_server binary as a child process:
// start it on port 0 (its port read from --port_file), watch its resident
// memory, stop it with SIGTERM, talk to it with generated stubs of its own
// connection (as separate worker processes have), and read its /metrics.
//
// Thread-safety: a ServerProcess belongs to one thread; the free functions
// are thread-safe.
#ifndef ASGD_TESTS_SERVER_PROCESS_H_
#define ASGD_TESTS_SERVER_PROCESS_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/asgd.grpc.pb.h"

namespace asgd {

// VmRSS of `pid` in kB, or -1.
inline int64_t RssKb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kb = -1;
    fields >> kb;
    return kb;
  }
  return -1;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The test's scratch directory.
inline std::string TestDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

// Opens a TCP connection to 127.0.0.1:port, every read and write bounded by
// `timeout_s`; -1 on failure.
inline int TcpConnect(int port, double timeout_s) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{
      static_cast<time_t>(timeout_s),
      static_cast<suseconds_t>((timeout_s - std::floor(timeout_s)) * 1e6)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// GET /metrics from 127.0.0.1:port; the body, or "" on failure or timeout.
inline std::string HttpGetMetrics(int port, double timeout_s) {
  const int fd = TcpConnect(port, timeout_s);
  if (fd < 0) return "";
  const std::string request =
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd, request.data(), request.size(), 0) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buf[65536];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, n);
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.1 200") ||
      body == std::string::npos) {
    return "";
  }
  return response.substr(body + 4);
}

// The value of the unlabeled series `name` on a /metrics page; -1 when the
// page has no such line.
inline double PageValue(const std::string& page, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || !absl::ConsumePrefix(&line, " "))
      continue;
    double value = 0;
    if (absl::SimpleAtod(line, &value)) return value;
  }
  return -1;
}

// Reads an integer a process writes to `path`; 0 until it is there.
inline int ReadPortFile(const std::string& path) {
  int port = 0;
  const std::string text = ReadFile(path);
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) && port > 0) {
    return port;
  }
  return 0;
}

// The asgd_server child process: started with --port=0, its port read from
// --port_file. Killed (SIGKILL) if the test exits without stopping it, also
// when the test process dies (PR_SET_PDEATHSIG).
class ServerProcess {
 public:
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // `name` keeps the files of several servers in one directory apart.
  void Start(const std::string& binary, const std::vector<std::string>& flags,
             const std::string& dir, const std::string& name = "server") {
    port_file_ = absl::StrCat(dir, "/", name, ".port");
    log_file_ = absl::StrCat(dir, "/", name, ".log");
    unlink(port_file_.c_str());
    std::vector<std::string> args = {binary, "--host=127.0.0.1", "--port=0",
                                     "--port_file=" + port_file_};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    ASSERT_GE(pid_, 0) << "fork failed";
    if (pid_ == 0) {
      // Child: only async-signal-safe calls until exec.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      const int fd =
          open(log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
  }

  // Waits (bounded) for the port file; 0 if the server died or timed out.
  int WaitForPort(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (const int port = ReadPortFile(port_file_); port > 0) return port;
      if (!Alive()) return 0;
      absl::SleepFor(absl::Milliseconds(10));  // polling a file, bounded
    }
    return 0;
  }

  bool Alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_status_ = status;
      pid_ = -1;
      return false;
    }
    return true;
  }

  // SIGTERM, then waits (bounded) for the exit. Returns the wait status, or
  // -1 when it had to be killed.
  int Stop(absl::Duration timeout) {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, SIGTERM);
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (!Alive()) return exit_status_;
      absl::SleepFor(absl::Milliseconds(10));  // polling the child, bounded
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }

  pid_t pid() const { return pid_; }
  std::string Log() const { return ReadFile(log_file_); }

 private:
  pid_t pid_ = -1;
  int exit_status_ = -1;
  std::string port_file_;
  std::string log_file_;
};

// A stub with a connection of its own.
inline std::unique_ptr<asgd::v1::ParameterServer::Stub> NewStub(
    const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return asgd::v1::ParameterServer::NewStub(grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args));
}

// Lets a call wait (up to its deadline) for its connection instead of failing
// at once when a connection attempt fails: a burst of connections on a loaded
// machine now and then gets a transient connect error on loopback
// ("failed to connect to all addresses"), and then the channel backs off.
// For tests that measure the server, not the client's connection attempts.
inline void WaitForConnection(grpc::ClientContext* ctx) {
  ctx->set_wait_for_ready(true);
}

template <typename T>
void SetDeadline(grpc::ClientContext* ctx, T duration) {
  ctx->set_deadline(std::chrono::system_clock::now() + duration);
}

}  // namespace asgd

#endif  // ASGD_TESTS_SERVER_PROCESS_H_
