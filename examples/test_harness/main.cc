// examples/test_harness/main.cc — the test binary's main(): GoogleTest plus
// the gpupool hooks (ProcessPools() kept for the whole run, a leak check
// after every test), then the pool stats. Linking gpupool::testing_main
// instead of GTest::gtest_main installs the same hooks without this file.

#include <cstdio>

#include "gpupool/gpupool.h"
#include "gpupool/testing/gtest_integration.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  gpupool::testing::InstallProcessPoolsTestHooks();
  const int result = RUN_ALL_TESTS();

  absl::StatusOr<gpupool::Pools*> pools = gpupool::ProcessPools();
  if (pools.ok()) {
    std::printf("backend %s; after %d tests, each with its own client:\n",
                std::string((*pools)->backend().name()).c_str(),
                ::testing::UnitTest::GetInstance()->test_to_run_count());
    std::printf("  streams: %s\n",
                (*pools)->streams().GetStats().ToString().c_str());
    std::printf("  events: %s\n",
                (*pools)->events().GetStats().ToString().c_str());
    std::printf("  allocations: %s\n",
                (*pools)->allocations().GetStats().ToString().c_str());
  }
  return result;
}
