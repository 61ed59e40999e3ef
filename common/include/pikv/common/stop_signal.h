// Clean shutdown on SIGTERM/SIGINT for pikv's daemons: block the signals in
// every thread (call BlockStopSignals before starting any), then wait for one
// on the main thread. No async signal handler runs, so shutdown code may do
// anything.
#pragma once

#include <signal.h>

namespace pikv {

inline sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Returns the signal that arrived.
inline int WaitForStopSignal(const sigset_t& set) {
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace pikv
