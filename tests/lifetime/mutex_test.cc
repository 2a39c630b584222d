// gpupool::internal::Mutex: the pools' annotated std::mutex keeps
// absl::Mutex's Await semantics (a waiter's condition is re-evaluated when
// another thread releases the lock).

#include "src/lifetime/mutex.h"

#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace gpupool::internal {
namespace {

struct Flag {
  Mutex mu;
  bool set ABSL_GUARDED_BY(mu) = false;
  int waiting ABSL_GUARDED_BY(mu) = 0;
};

TEST(MutexTest, AwaitWakesWhenAnotherThreadMakesTheConditionTrue) {
  Flag flag;
  std::thread waiter([&flag] {
    MutexLock lock(&flag.mu);
    ++flag.waiting;
    flag.mu.Await(absl::Condition(&flag.set));
    EXPECT_TRUE(flag.set);
  });
  {
    // Wait until the waiter is inside Await (it holds the lock until then).
    // Either thread may get here first: whichever blocks first is woken
    // when the other blocks or unlocks.
    MutexLock lock(&flag.mu);
    flag.mu.Await(absl::Condition(
        +[](int* waiting) { return *waiting == 1; }, &flag.waiting));
    flag.set = true;
  }
  waiter.join();
}

// A thread that makes another waiter's condition true and then blocks in
// Await itself (without an Unlock in between) must wake that waiter, as
// absl::Mutex does; otherwise both sleep forever.
struct Handshake {
  Mutex mu;
  bool x ABSL_GUARDED_BY(mu) = false;
  bool y ABSL_GUARDED_BY(mu) = false;
  int waiting ABSL_GUARDED_BY(mu) = 0;
};

TEST(MutexTest, BlockingInAwaitWakesOtherWaiters) {
  for (int round = 0; round < 100; ++round) {
    Handshake h;
    std::thread other([&h] {
      MutexLock lock(&h.mu);
      ++h.waiting;
      h.mu.Await(absl::Condition(&h.x));
      h.y = true;
    });
    {
      MutexLock lock(&h.mu);
      h.mu.Await(absl::Condition(
          +[](int* waiting) { return *waiting == 1; }, &h.waiting));
      h.x = true;
      h.mu.Await(absl::Condition(&h.y));  // blocks: must wake `other`
    }
    other.join();
  }
}

TEST(MutexTest, AwaitWithDeadlineReportsWhetherTheConditionHolds) {
  Flag flag;
  MutexLock lock(&flag.mu);
  EXPECT_FALSE(flag.mu.AwaitWithDeadline(absl::Condition(&flag.set),
                                         absl::Now() + absl::Milliseconds(1)));
  flag.set = true;
  EXPECT_TRUE(flag.mu.AwaitWithDeadline(absl::Condition(&flag.set),
                                        absl::InfinitePast()));
}

}  // namespace
}  // namespace gpupool::internal
