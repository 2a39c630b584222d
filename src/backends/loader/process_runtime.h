// ProcessRuntime<Table>: the process's one table of a runtime's entry points
// (CudaRuntime, HipRuntime). It is chosen once — on first use, by loading
// the runtime library, or before that by an explicit Use (a preload library
// hands over the real runtime's functions this way) — and never changed or
// destroyed after: forwards may run during static destruction, while pools
// drain at exit. Thread-safe. The chosen table is also published through an
// atomic pointer that the backends' forwards read without a lock.

#ifndef GPUPOOL_SRC_BACKENDS_LOADER_PROCESS_RUNTIME_H_
#define GPUPOOL_SRC_BACKENDS_LOADER_PROCESS_RUNTIME_H_

#include <atomic>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace gpupool::loader_internal {

// `Table` has a `std::string source` naming where its functions came from.
template <typename Table>
class ProcessRuntime {
 public:
  // `runtime` names the runtime in messages ("CUDA"); `use_call` is the
  // public function that calls Use ("UseCudaRuntime"); the chosen table is
  // stored into `*published` as well.
  ProcessRuntime(absl::string_view runtime, absl::string_view use_call,
                 std::atomic<const Table*>* published)
      : runtime_(runtime), use_call_(use_call), published_(published) {}
  ProcessRuntime(const ProcessRuntime&) = delete;
  ProcessRuntime& operator=(const ProcessRuntime&) = delete;

  // The table; the first call chooses it with `load`. A failed load is the
  // answer from then on (the process's runtime does not change).
  absl::StatusOr<const Table*> Get(
      absl::FunctionRef<absl::StatusOr<Table>()> load) {
    absl::MutexLock lock(&mu_);
    if (!chosen_) {
      chosen_ = true;
      absl::StatusOr<Table> loaded = load();
      if (loaded.ok()) {
        Publish(*std::move(loaded));
      } else {
        error_ = loaded.status();
      }
    }
    if (table_ == nullptr) return error_;
    return table_;
  }

  // Chooses `table` before first use; FailedPrecondition once chosen.
  absl::Status Use(Table table) {
    absl::MutexLock lock(&mu_);
    if (chosen_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the process's ", runtime_, " runtime is already chosen (",
          table_ != nullptr ? table_->source
                            : std::string(MessageWithoutFault(error_)),
          "); ", use_call_, " must come before the first ", runtime_,
          " backend"));
    }
    chosen_ = true;
    Publish(std::move(table));
    return absl::OkStatus();
  }

 private:
  void Publish(Table table) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    table_ = new Table(std::move(table));  // never freed: see above
    published_->store(table_, std::memory_order_release);
  }

  const std::string runtime_;
  const std::string use_call_;
  std::atomic<const Table*>* const published_;
  absl::Mutex mu_;
  bool chosen_ ABSL_GUARDED_BY(mu_) = false;
  const Table* table_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpupool::loader_internal

#endif  // GPUPOOL_SRC_BACKENDS_LOADER_PROCESS_RUNTIME_H_
