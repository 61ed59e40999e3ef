// The test harness's own promise: no process a test starts outlives it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "test_support.h"

namespace pikv::testing {
namespace {

using namespace std::chrono_literals;

// Running, not a zombie waiting to be reaped.
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  if (!(stat >> pid_field >> comm >> state)) return false;
  return state != "Z" && state != "X";
}

bool DiesWithin(pid_t pid, std::chrono::milliseconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  while (Alive(pid)) {
    if (std::chrono::steady_clock::now() - t0 > limit) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A parent killed outright (as ctest does on a timeout) takes its children along.
TEST(ChildProcessTest, ChildrenDieWhenTheirParentIsKilled) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t parent = fork();
  if (parent == 0) {
    ChildProcess sleeper("sleep", {"300"});
    const pid_t pid = sleeper.pid();
    if (write(fds[1], &pid, sizeof pid) != sizeof pid) _exit(1);
    pause();
    _exit(0);
  }
  pid_t child = -1;
  ASSERT_EQ(read(fds[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  close(fds[0]);
  close(fds[1]);
  ASSERT_TRUE(Alive(child));
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  EXPECT_TRUE(DiesWithin(child, 3s)) << "sleep " << child << " outlived its killed parent";
  kill(child, SIGKILL);  // whatever happened, leave nothing behind
}

// What a child starts (a shell's children) goes with it.
TEST(ChildProcessTest, TheWholeProcessGroupGoesWithTheChild) {
  pid_t grandchild = -1;
  {
    ChildProcess shell("sh", {"-c", "sleep 300 & echo $!; wait"});
    auto line = shell.ReadLine(5s);
    ASSERT_TRUE(line.has_value());
    grandchild = std::stoi(*line);
    ASSERT_TRUE(Alive(grandchild));
  }
  EXPECT_TRUE(DiesWithin(grandchild, 3s)) << "sleep " << grandchild << " outlived its shell";
}

}  // namespace
}  // namespace pikv::testing
