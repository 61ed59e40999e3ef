#include "pikv/common/guarded_thread.h"

#include <spdlog/spdlog.h>

#include <exception>

namespace pikv {

std::thread GuardedThread(std::string name, std::function<void()> body,
                          std::function<void()> on_escape) {
  return std::thread(
      [name = std::move(name), body = std::move(body), on_escape = std::move(on_escape)] {
        std::string what;
        try {
          body();
          return;
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
          what = "an exception that is not a std::exception";
        }
        spdlog::critical("{} thread failed: {}", name, what);
        if (!on_escape) return;
        try {
          on_escape();
        } catch (...) {
          spdlog::critical("{} thread: its clean-up after the failure threw too", name);
        }
      });
}

}  // namespace pikv
