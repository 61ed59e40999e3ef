#pragma once

#include <functional>
#include <string>
#include <thread>

namespace pikv {

// A thread whose body cannot take the process down. An exception that
// reaches the top of a std::thread calls std::terminate; here it is logged
// at critical level with the thread's name, then `on_escape` runs (what
// going silent means for that thread: an election's epoch dropped, say).
// Every long-lived thread of pikv's daemons starts through this.
std::thread GuardedThread(std::string name, std::function<void()> body,
                          std::function<void()> on_escape = {});

}  // namespace pikv
