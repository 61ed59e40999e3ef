#pragma once

#include <functional>
#include <string>
#include <thread>

namespace pikv {

// Every long-lived thread of pikv's daemons starts through one of these two,
// so that what escapes a thread's body (std::terminate, unnamed, on a bare
// std::thread) is logged at critical level with the thread's name.
//
// GuardedThread: a thread the process goes on without. It ends, then
// `on_escape` runs: what going silent means for that thread (an election's
// epoch dropped, say); its silence shows (a reporter stops heartbeats, a
// server stops answering health checks).
std::thread GuardedThread(std::string name, std::function<void()> body,
                          std::function<void()> on_escape = {});

// EssentialThread: a thread the process cannot serve without, whose end
// nothing else would show (a worker whose requests stay in flight, a ZAP
// handler every handshake waits for). The process aborts, so that its
// supervisor restarts it, as std::terminate did, after saying which thread.
std::thread EssentialThread(std::string name, std::function<void()> body);

}  // namespace pikv
