// gpupool::testing_main: a drop-in replacement for GTest::gtest_main that
// installs ProcessPoolsEnvironment and LeakCheckListener (default options).

#include "gpupool/testing/gtest_integration.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  gpupool::testing::InstallProcessPoolsTestHooks();
  return RUN_ALL_TESTS();
}
