// Mutex and MutexLock with clang's thread-safety annotations, for classes
// that hold more than one lock: members are marked PIKV_GUARDED_BY(mu_),
// private helpers that expect the lock PIKV_REQUIRES(mu_), and lock order
// PIKV_ACQUIRED_BEFORE/AFTER. clang's -Wthread-safety (on in every clang build, an
// error there) then proves at compile time that no guarded member is
// touched without its lock. GCC sees plain std::mutex.
#pragma once

#include <mutex>

#if defined(__clang__)
#define PIKV_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PIKV_THREAD_ANNOTATION(x)
#endif

#define PIKV_CAPABILITY(x) PIKV_THREAD_ANNOTATION(capability(x))
#define PIKV_SCOPED_CAPABILITY PIKV_THREAD_ANNOTATION(scoped_lockable)
#define PIKV_GUARDED_BY(x) PIKV_THREAD_ANNOTATION(guarded_by(x))
#define PIKV_PT_GUARDED_BY(x) PIKV_THREAD_ANNOTATION(pt_guarded_by(x))
#define PIKV_ACQUIRED_AFTER(...) PIKV_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define PIKV_ACQUIRED_BEFORE(...) PIKV_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define PIKV_REQUIRES(...) PIKV_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define PIKV_EXCLUDES(...) PIKV_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define PIKV_ACQUIRE(...) PIKV_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define PIKV_RELEASE(...) PIKV_THREAD_ANNOTATION(release_capability(__VA_ARGS__))

namespace pikv {

class PIKV_CAPABILITY("mutex") Mutex {
 public:
  void lock() PIKV_ACQUIRE() { mu_.lock(); }
  void unlock() PIKV_RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope (std::lock_guard, annotated).
class PIKV_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) PIKV_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() PIKV_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace pikv
