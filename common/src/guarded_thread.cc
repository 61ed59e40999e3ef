#include "pikv/common/guarded_thread.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <exception>

namespace pikv {
namespace {

// Runs body; false, with the failure logged, when something escaped it.
bool RanToItsEnd(const std::string& name, const std::function<void()>& body) {
  std::string what;
  try {
    body();
    return true;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  spdlog::critical("{} thread failed: {}", name, what);
  return false;
}

}  // namespace

std::thread GuardedThread(std::string name, std::function<void()> body,
                          std::function<void()> on_escape) {
  return std::thread(
      [name = std::move(name), body = std::move(body), on_escape = std::move(on_escape)] {
        if (!RanToItsEnd(name, body) && on_escape) RanToItsEnd(name + " clean-up", on_escape);
      });
}

std::thread EssentialThread(std::string name, std::function<void()> body) {
  return std::thread([name = std::move(name), body = std::move(body)] {
    if (RanToItsEnd(name, body)) return;
    spdlog::critical("the process cannot serve without its {} thread: aborting", name);
    spdlog::shutdown();  // flushed before the abort
    std::abort();
  });
}

}  // namespace pikv
