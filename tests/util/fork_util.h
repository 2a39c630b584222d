// Runs test code in a fork()ed child, with a watchdog in the parent.

#ifndef GPUPOOL_TESTS_UTIL_FORK_UTIL_H_
#define GPUPOOL_TESTS_UTIL_FORK_UTIL_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gpupool::testing {

// RunInForkedChild's result when the child did not finish in time.
inline constexpr int kChildHung = 255;
// RunInForkedChild's result when fork() itself failed (no child ran).
inline constexpr int kForkFailed = 254;

// Runs `child` (returning an int exit code) in a fork()ed child. Returns the
// child's exit code, 128 + the signal that killed it, kChildHung when it did
// not finish within `timeout_ms` (it is then killed), or kForkFailed. The
// watchdog is the parent's, not an alarm() in the child: a child can hang
// inside fork() itself, before any code of its own runs.
template <typename Fn>
int RunInForkedChild(Fn child, int timeout_ms = 20000) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  if (pid < 0) return kForkFailed;
  int status = 0;
  for (int waited_ms = 0;; waited_ms += 5) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 || waited_ms >= timeout_ms) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return kChildHung;
    }
    usleep(5000);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace gpupool::testing

#endif  // GPUPOOL_TESTS_UTIL_FORK_UTIL_H_
