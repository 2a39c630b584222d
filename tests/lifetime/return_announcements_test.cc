// Return announcements (src/lifetime/return_announcements.h): a thread
// announces one return at a time, Close's wait holds exactly while a return to
// its own shard is announced, and exited threads' slots are reused.

#include "src/lifetime/return_announcements.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace gpupool::internal {
namespace {

class ReturnAnnouncementsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ReturnAnnouncementsAvailable()) {
      GTEST_SKIP() << "membarrier(MEMBARRIER_CMD_GLOBAL) is not available "
                      "here: every return counts itself instead";
    }
  }
};

TEST_F(ReturnAnnouncementsTest, OneAnnouncementPerThreadAtATime) {
  int first = 0;
  int second = 0;
  ASSERT_TRUE(BeginAnnouncedReturn(&first));
  // A return inside a return (on the same thread) must count itself.
  EXPECT_FALSE(BeginAnnouncedReturn(&second));
  EndAnnouncedReturn();
  EXPECT_TRUE(BeginAnnouncedReturn(&second));
  EndAnnouncedReturn();
}

TEST_F(ReturnAnnouncementsTest, CloseWaitsOnlyForReturnsToItsOwnShard) {
  int mine = 0;
  int other = 0;
  absl::Notification announced;
  absl::Notification end;
  std::thread returner([&] {
    ASSERT_TRUE(BeginAnnouncedReturn(&mine));
    announced.Notify();
    end.WaitForNotification();
    EndAnnouncedReturn();
  });
  announced.WaitForNotification();
  // Another shard's Close has nothing to wait for.
  AwaitAnnouncedReturns(&other);
  std::atomic<bool> waited{false};
  std::thread closer([&] {
    AwaitAnnouncedReturns(&mine);
    waited.store(true);
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(waited.load()) << "Close returned while a return was announced";
  end.Notify();
  closer.join();
  returner.join();
  EXPECT_TRUE(waited.load());
}

TEST_F(ReturnAnnouncementsTest, SlotsOfExitedThreadsAreReused) {
  int owner = 0;
  auto announce_once = [&] {
    ASSERT_TRUE(BeginAnnouncedReturn(&owner));
    EndAnnouncedReturn();
  };
  std::thread(announce_once).join();
  const int slots = AnnouncementSlotsForTesting();
  for (int i = 0; i < 20; ++i) std::thread(announce_once).join();
  // One thread at a time: each takes the slot the previous one gave back.
  EXPECT_EQ(AnnouncementSlotsForTesting(), slots);
}

}  // namespace
}  // namespace gpupool::internal
