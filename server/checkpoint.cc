#include "server/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/text_quote.h"
#include "common/wire_codec.h"

namespace asgd {
namespace {

constexpr char kMagic[8] = {'A', 'S', 'G', 'D', 'C', 'K', 'P', '1'};

uint64_t Fnv1a(const char* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// The whole file at `path` (a regular file of at most `max_bytes`).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open checkpoint " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const absl::Status s = Errno("stat checkpoint " + path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " is not a regular file; move it away"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path, " is ", st.st_size,
        " bytes, more than a checkpoint of this server's model can have: one "
        "of a larger model, or corrupt; refusing to start from it. Start "
        "with the flags it was written with, or move it away to start "
        "fresh."));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t r = ::read(fd, &bytes[done], bytes.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const absl::Status s =
          r < 0 ? Errno("read checkpoint " + path)
                : absl::DataLossError(absl::StrCat("checkpoint ", path,
                                                   " shrank while being read"));
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return bytes;
}

bool AllFinite(const std::vector<float>& v) {
  return std::isfinite(MaxAbs(v.data(), static_cast<int64_t>(v.size())));
}

absl::Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("write " + path);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointPath(const std::string& dir, int server_index,
                           int num_servers) {
  return absl::StrCat(dir, "/server-", server_index, "-of-", num_servers, ".ckpt");
}

std::string PreviousCheckpointPath(const std::string& dir, int server_index,
                                   int num_servers) {
  return CheckpointPath(dir, server_index, num_servers) + ".prev";
}

absl::Status PrepareCheckpointDir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "--checkpoint_dir ", dir, " exists and is not a directory"));
  }
  // Create it and any missing parent.
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 &&
        errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create --checkpoint_dir ", dir, ": ", prefix,
                       ": ", std::strerror(errno)));
    }
    if (slash == std::string::npos) break;
  }
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--checkpoint_dir ", dir, " could not be created as a directory"));
  }
  return absl::OkStatus();
}

absl::Status WriteCheckpoint(const std::string& dir, const ModelLayout& layout,
                             int server_index, const StoreSnapshot& snapshot) {
  if (!AllFinite(snapshot.weights) || !AllFinite(snapshot.state)) {
    return absl::FailedPreconditionError(
        "the snapshot holds non-finite values; not written, the previous "
        "checkpoint is kept");
  }
  std::string header = absl::StrCat(
      "fingerprint ", layout.Fingerprint(), "\nserver ", server_index, " ",
      layout.num_servers(), "\nversion ", snapshot.version, "\nweights ",
      snapshot.weights.size(), "\nstate ", snapshot.state.size(), "\n");
  std::string bytes(kMagic, sizeof(kMagic));
  const uint32_t header_len = static_cast<uint32_t>(header.size());
  bytes.append(reinterpret_cast<const char*>(&header_len), sizeof(header_len));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(snapshot.weights.data()),
               snapshot.weights.size() * sizeof(float));
  bytes.append(reinterpret_cast<const char*>(snapshot.state.data()),
               snapshot.state.size() * sizeof(float));
  const uint64_t checksum = Fnv1a(bytes.data(), bytes.size());
  bytes.append(reinterpret_cast<const char*>(&checksum), sizeof(checksum));

  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Errno("create checkpoint directory " + dir);
  }
  const std::string path = CheckpointPath(dir, server_index, layout.num_servers());
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open " + tmp);
  absl::Status s = WriteAll(fd, bytes.data(), bytes.size(), tmp);
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync " + tmp);
  if (::close(fd) != 0 && s.ok()) s = Errno("close " + tmp);
  // Keep the current checkpoint as the previous generation: a hard link
  // under a temporary name, renamed over the old .prev (both atomic).
  const std::string prev =
      PreviousCheckpointPath(dir, server_index, layout.num_servers());
  const std::string prev_tmp = prev + ".tmp";
  ::unlink(prev_tmp.c_str());
  if (s.ok() && ::link(path.c_str(), prev_tmp.c_str()) == 0 &&
      ::rename(prev_tmp.c_str(), prev.c_str()) != 0) {
    ::unlink(prev_tmp.c_str());  // keeping it is best effort
  }
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = Errno("rename " + tmp);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // Make the rename itself durable.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<StoreSnapshot>> ReadCheckpoint(
    const std::string& dir, const ModelLayout& layout, int server_index,
    bool needs_state) {
  const std::string path = CheckpointPath(dir, server_index, layout.num_servers());
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<StoreSnapshot>();
    return Errno("stat checkpoint " + path);
  }
  const int64_t range = layout.ServerRange(server_index).size();
  constexpr size_t kMaxHeaderBytes = 1 << 16;
  const size_t max_bytes = sizeof(kMagic) + sizeof(uint32_t) + kMaxHeaderBytes +
                           2 * static_cast<size_t>(range) * sizeof(float) +
                           sizeof(uint64_t);
  absl::StatusOr<std::string> read = ReadSmallFile(path, max_bytes);
  if (!read.ok()) return read.status();
  const std::string& bytes = *read;
  const std::string previous =
      PreviousCheckpointPath(dir, server_index, layout.num_servers());
  auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path, " is corrupt (", why,
        "); refusing to start from it. Move it away to start fresh, or move "
        "the previous generation ",
        previous, " into its place."));
  };
  auto mismatch = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " does not belong to this server: ", why,
        ". Start with the flags it was written with, or move it away."));
  };
  const size_t fixed = sizeof(kMagic) + sizeof(uint32_t) + sizeof(uint64_t);
  if (bytes.size() < fixed || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return corrupt("not an asgd checkpoint or truncated");
  }
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - sizeof(stored), sizeof(stored));
  if (Fnv1a(bytes.data(), bytes.size() - sizeof(stored)) != stored) {
    return corrupt("checksum mismatch");
  }
  uint32_t header_len;
  std::memcpy(&header_len, bytes.data() + sizeof(kMagic), sizeof(header_len));
  if (header_len > bytes.size() - fixed) return corrupt("bad header length");
  const std::string header = bytes.substr(sizeof(kMagic) + sizeof(uint32_t), header_len);
  std::string fingerprint;
  int64_t index = -1, servers = -1, weights = -1, state = -1;
  uint64_t version = 0;
  for (absl::string_view line : absl::StrSplit(header, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    bool ok = true;
    if (f[0] == "fingerprint" && f.size() == 2) {
      fingerprint = std::string(f[1]);
    } else if (f[0] == "server" && f.size() == 3) {
      ok = absl::SimpleAtoi(f[1], &index) && absl::SimpleAtoi(f[2], &servers);
    } else if (f[0] == "version" && f.size() == 2) {
      ok = absl::SimpleAtoi(f[1], &version);
    } else if (f[0] == "weights" && f.size() == 2) {
      ok = absl::SimpleAtoi(f[1], &weights);
    } else if (f[0] == "state" && f.size() == 2) {
      ok = absl::SimpleAtoi(f[1], &state);
    } else {
      ok = false;
    }
    if (!ok) {
      return corrupt(
          absl::StrCat("bad header line '", EscapeForMessage(line), "'"));
    }
  }
  if (fingerprint.empty() || index < 0 || weights < 0 || state < 0) {
    return corrupt("incomplete header");
  }
  if (fingerprint != layout.Fingerprint()) {
    return mismatch(absl::StrCat("it holds model/pool ", fingerprint,
                                 ", this server ", layout.Fingerprint()));
  }
  if (index != server_index || servers != layout.num_servers()) {
    return mismatch(absl::StrCat("it is server ", index, " of ", servers));
  }
  const int64_t want = layout.ServerRange(server_index).size();
  if (weights != want) {
    return mismatch(absl::StrCat("it has ", weights, " weights, want ", want));
  }
  if ((state > 0) != needs_state || (state > 0 && state != want)) {
    return mismatch(needs_state ? "it has no momentum state but the optimizer uses momentum"
                                : "it has momentum state but the optimizer uses none");
  }
  const size_t body = sizeof(kMagic) + sizeof(uint32_t) + header_len;
  if (bytes.size() != body + (weights + state) * sizeof(float) + sizeof(uint64_t)) {
    return corrupt("size does not match its header");
  }
  StoreSnapshot snapshot;
  snapshot.version = version;
  snapshot.weights.resize(weights);
  snapshot.state.resize(state);
  std::memcpy(snapshot.weights.data(), bytes.data() + body, weights * sizeof(float));
  std::memcpy(snapshot.state.data(), bytes.data() + body + weights * sizeof(float),
              state * sizeof(float));
  if (!AllFinite(snapshot.weights) || !AllFinite(snapshot.state)) {
    return corrupt("it holds non-finite weights or state");
  }
  return std::optional<StoreSnapshot>(std::move(snapshot));
}

}  // namespace asgd
