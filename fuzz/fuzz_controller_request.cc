// One message through the socket-free ControllerHandler, against a cluster
// state that persists across inputs; the clock advances and the lifecycle
// ticks as inputs go by, so registrations, events, inventories, deaths and
// admin queries interleave.
#include "pikv/controller/controller_handler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace std::chrono_literals;
  static pikv::controller::ClusterState state({250ms, 500ms, 2000ms, 64}, 1);
  static pikv::controller::ControllerHandler handler(state, pikv::WireLimits{});
  static auto now = pikv::controller::Clock::now();
  static uint64_t count = 0;
  now += 1ms;
  if (++count % 64 == 0) handler.Tick(now);
  const std::string identity = "peer-" + std::to_string(size % 8);
  handler.Handle(identity, nullptr, {data, size}, size % 5 == 0 ? 1 : 0, now);
  return 0;
}
