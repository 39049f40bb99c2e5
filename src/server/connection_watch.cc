#include "server/connection_watch.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace evt::server {

namespace {

struct SocketAddress {
  std::string host;
  int port = -1;
  bool operator==(const SocketAddress&) const = default;
};

// As httplib writes Request::local_addr and remote_addr: getnameinfo with NI_NUMERICHOST.
SocketAddress address_of(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return {};
  }
  return {host, std::atoi(port)};
}

// The address (local, or peer) of socket `fd`; an empty host when fd is not a connected socket.
SocketAddress address(int fd, bool peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return rc == 0 ? address_of(addr, len) : SocketAddress{};
}

}  // namespace

ConnectionWatch::ConnectionWatch(const httplib::Request& req) {
  const SocketAddress local{req.local_addr, req.local_port}, remote{req.remote_addr, req.remote_port};
  if (local.host.empty() || remote.host.empty()) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    if (address(fd, false) == local && address(fd, true) == remote) {
      fd_ = fd;
      return;
    }
  }
}

bool ConnectionWatch::closed() const {
  if (fd_ < 0) return false;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  // > 0: the client sent more (a pipelined request), so it is still there.
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace evt::server
