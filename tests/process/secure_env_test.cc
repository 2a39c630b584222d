// Secure execution: in a setuid, setgid or capability-raised process
// (AT_SECURE) every GPUPOOL_* variable is ignored, as ld.so ignores
// LD_LIBRARY_PATH there, so that a caller cannot make a privileged program
// load the library it names. The probe (secure_env_probe.cc) runs once
// plainly and once as a setuid-root binary started by an unprivileged user
// (setpriv); the second run needs root to set it up and is skipped, with the
// reason, where it cannot be.

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPlanted[] = "/nonexistent/gpupool-planted-runtime.so";

// The environment every run gets: a library to load, a malformed config, a
// malformed switch and the simulator.
std::string Environment() {
  return absl::StrCat(
      "env -i PATH=/usr/bin:/bin GPUPOOL_CUDA_RUNTIME=", kPlanted,
      " GPUPOOL_CONF=not-a-config GPUPOOL_STATS=maybe "
      "GPUPOOL_BACKEND=sim ");
}

std::string RunCommand(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 512> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) {
    out += buffer.data();
  }
  *status = pclose(pipe);
  return out;
}

TEST(SecureEnvTest, APlainProcessReadsTheVariables) {
  int status = -1;
  const std::string out =
      RunCommand(Environment() + GPUPOOL_SECURE_ENV_PROBE, &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("secure=0\n"));
  EXPECT_THAT(out, HasSubstr(kPlanted));  // the loader tried it
  // GPUPOOL_CONF is read first and refused.
  EXPECT_THAT(out, HasSubstr("pools=3 GPUPOOL_CONF"));
}

TEST(SecureEnvTest, APlainProcessHonoursGpupoolBackend) {
  int status = -1;
  const std::string out = RunCommand(
      absl::StrCat("env -i GPUPOOL_BACKEND=sim ", GPUPOOL_SECURE_ENV_PROBE),
      &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("pools=0 sim"));
}

TEST(SecureEnvTest, ASetuidProcessIgnoresEveryVariable) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root to make a setuid-root copy of the probe";
  }
  if (access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "no /usr/bin/setpriv to drop to another uid";
  }
  // A setuid-root copy in a directory every user may enter: the kernel then
  // starts it with AT_SECURE when an unprivileged user runs it.
  char dir_template[] = "/tmp/gpupool-secure-env-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string probe = dir + "/probe";
  int status = -1;
  RunCommand(absl::StrCat("cp ", GPUPOOL_SECURE_ENV_PROBE, " ", probe),
             &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  ASSERT_EQ(chown(probe.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(probe.c_str(), 04755), 0);
  const std::string out =
      RunCommand(absl::StrCat(Environment(),
                              "/usr/bin/setpriv --reuid=65534 --regid=65534 "
                              "--clear-groups ",
                              probe, " 2>&1"),
                 &status);
  unlink(probe.c_str());
  rmdir(dir.c_str());
  if (!absl::StrContains(out, "secure=1\n")) {
    GTEST_SKIP() << "the kernel did not start the setuid probe in "
                    "secure-execution mode (a nosuid /tmp, or no setuid "
                    "support here): "
                 << out;
  }
  ASSERT_EQ(status, 0) << out;
  // The planted runtime was never named to the loader, and none of the
  // malformed values was even read.
  EXPECT_THAT(out, Not(HasSubstr(kPlanted)));
  EXPECT_THAT(out, Not(HasSubstr("GPUPOOL_CONF:")));
  EXPECT_THAT(out, Not(HasSubstr("pools=3 ")));
  // GPUPOOL_BACKEND=sim ignored too: the runtime backends are searched.
  EXPECT_THAT(out, Not(HasSubstr("pools=0 sim")));
}

}  // namespace
