#pragma once
// Whether the client of a request still being handled has closed its connection, for a handler
// that waits a long time before it writes anything (a whole, not streamed, completion).
//
// httplib 0.11 (Debian 12's) gives a handler neither its socket nor Request::is_connection_closed()
// (later versions have it), so the socket is found once among the process's descriptors by the
// request's address pair: local and remote address and port name one TCP connection, and the
// handler's thread owns that socket until the handler returns.

#include <httplib.h>

namespace evt::server {

class ConnectionWatch {
 public:
  explicit ConnectionWatch(const httplib::Request& req);

  // True once the client has closed or reset the connection (a peek reads its end, or fails);
  // false while it is open, and when the socket was not found.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace evt::server
