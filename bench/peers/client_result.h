// What every bench/peers client process shares with the driver
// (peers_bench.py): the start signal and the one JSON line of results.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace pikv::bench {

// This process's CPU-seconds (every thread) so far.
inline double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Says "ready" and waits for a line on stdin: the driver starts a run's
// clients together, once each is set up.
inline void WaitForGo() {
  std::cout << "ready" << std::endl;
  std::string go;
  std::getline(std::cin, go);
}

// The last line a client prints: {"ok", "failed", "bytes", "seconds",
// "cpu_seconds", "latencies_us": [...]}.
struct ClientResult {
  uint64_t ok = 0, failed = 0, bytes = 0;
  double seconds = 0, cpu_seconds = 0;
  std::vector<double> latencies_us;

  void Print() const {
    std::ostringstream json;
    json << R"({"ok": )" << ok << R"(, "failed": )" << failed << R"(, "bytes": )" << bytes
         << R"(, "seconds": )" << seconds << R"(, "cpu_seconds": )" << cpu_seconds
         << R"(, "latencies_us": [)";
    for (size_t i = 0; i < latencies_us.size(); ++i)
      json << (i ? ", " : "") << static_cast<uint64_t>(latencies_us[i]);
    std::cout << json.str() << "]}" << std::endl;
  }
};

}  // namespace pikv::bench
