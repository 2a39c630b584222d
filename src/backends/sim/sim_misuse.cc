// SimMisuseLog: counting, logging and reporting the simulator's misuse.

#include "src/backends/sim/sim_misuse.h"

#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "gpupool/backend.h"

namespace gpupool {
namespace sim_internal {
namespace {

void PrintMisuse(absl::string_view message) {
  std::fprintf(stderr, "gpupool sim misuse: %.*s\n",
               static_cast<int>(message.size()), message.data());
}

}  // namespace

SimMisuseLog::Reporter::~Reporter() {
  if (!message_.empty()) log_.Report(std::move(message_));
}

absl::Status SimMisuseLog::Reporter::Flag(std::string message) {
  message_ = std::move(message);
  return FaultError(Fault::kCaller, absl::StatusCode::kInvalidArgument,
                    absl::StrCat("sim misuse: ", message_));
}

SimMisuseLog::SimMisuseLog(std::function<void(absl::string_view)> hook)
    : hook_(hook ? std::move(hook) : PrintMisuse) {}

void SimMisuseLog::Report(std::string message) {
  count_.fetch_add(1, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&mu_);
    messages_.push_back(message);
  }
  hook_(message);
}

std::vector<std::string> SimMisuseLog::messages() const {
  absl::MutexLock lock(&mu_);
  return messages_;
}

}  // namespace sim_internal
}  // namespace gpupool
