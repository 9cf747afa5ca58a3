// Watching the client of a running HTTP request: has it hung up?
//
// cpp-httplib 0.11 (Debian 12) gives handlers no view of their socket (later versions add
// Request::is_connection_closed). A request does carry both ends of its TCP connection
// (local and remote address and port), which identify exactly one socket of this process: the
// accepted connection the handler's worker thread is serving. find_client_socket looks it up
// among the process's descriptors (/proc/self/fd), once per request.
//
// Invariants: the descriptor found stays this request's connection while its handler runs
// (cpp-httplib closes it only after the handler returns); peer_hung_up never reads from it, so
// unread request bytes stay for cpp-httplib.
#pragma once

#include <string>

namespace edgelm::serve {

// The descriptor whose local end is local_addr:local_port and whose peer is
// remote_addr:remote_port (addresses numeric, as cpp-httplib writes them); -1 if none.
int find_client_socket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port);

// True when the peer closed its side or the connection failed (EOF, reset); false while it is
// open or for fd < 0.
bool peer_hung_up(int fd);

}  // namespace edgelm::serve
