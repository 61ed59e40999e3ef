// Child processes for pikv's own launchers (`pikv demo`, `pikv cluster`) and
// for its tests: a temp dir that cleans up after itself, a free loopback
// port, and a child process whose stdout is read line by line.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace pikv::launch {

// A fresh directory under $TMPDIR, removed with everything in it on
// destruction. Throws std::runtime_error when none can be made.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// A loopback TCP port nobody listens on right now (0 if none could be found).
int FreePort();

// A child process with its stdout captured line by line. It dies with its
// parent (PR_SET_PDEATHSIG), also when the parent is killed or times out,
// and leads its own process group, which the destructor kills. A program
// that cannot be executed exits 127. Throws std::runtime_error when no pipe
// or process can be made.
class ChildProcess {
 public:
  ChildProcess(const std::string& program, const std::vector<std::string>& args);
  ~ChildProcess();  // SIGKILL if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  pid_t pid() const { return pid_; }
  // Next stdout line, or nullopt on EOF / timeout.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  void Signal(int sig);
  // Exit status (or 128+signal); nullopt if it did not exit in time.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool Running();

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

}  // namespace pikv::launch
