// A child process for two-process tests: fork + exec of a helper binary with
// its stdin and stdout on pipes, driven one line at a time.
//
//   PeerProcess peer(GPUPOOL_SIM_IPC_PEER, {"my-namespace"});
//   std::string handle = peer.Ask("export 4096 7");

#ifndef GPUPOOL_TESTS_UTIL_PEER_PROCESS_H_
#define GPUPOOL_TESTS_UTIL_PEER_PROCESS_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace gpupool::testing {

// `built` (the helper's path in the build tree) when it exists, else the file
// of the same name beside the running test (a bundle copied elsewhere).
inline std::string PeerBinary(const std::string& built) {
  if (access(built.c_str(), X_OK) == 0) return built;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return built;
  std::string dir(self, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/') + 1);
  return dir + built.substr(built.rfind('/') + 1);
}

class PeerProcess {
 public:
  PeerProcess(const std::string& built_binary,
              const std::vector<std::string>& args) {
    const std::string binary = PeerBinary(built_binary);
    int to_child[2];
    int from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], STDIN_FILENO);
      dup2(from_child[1], STDOUT_FILENO);
      close(to_child[0]);
      close(to_child[1]);
      close(from_child[0]);
      close(from_child[1]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(binary.c_str()));
      for (const std::string& arg : args) {
        argv.push_back(const_cast<char*>(arg.c_str()));
      }
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
  }
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;
  ~PeerProcess() {
    if (in_ != nullptr) fclose(in_);
    if (out_ != nullptr) fclose(out_);
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  bool started() const { return pid_ > 0 && in_ != nullptr && out_ != nullptr; }

  // Sends `line`; returns the peer's one-line answer ("" when it closed).
  std::string Ask(const std::string& line) {
    Send(line);
    std::string answer;
    int c;
    while ((c = fgetc(out_)) != EOF && c != '\n') answer.push_back(char(c));
    return answer;
  }
  // Sends `line` expecting no answer.
  void Send(const std::string& line) {
    fputs((line + "\n").c_str(), in_);
    fflush(in_);
  }
  // Kills the peer with SIGKILL (as the OOM killer does) and reaps it.
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }
  // Waits for the peer to exit; returns its exit status (-1 if signalled).
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

}  // namespace gpupool::testing

#endif  // GPUPOOL_TESTS_UTIL_PEER_PROCESS_H_
