// Background prewarms of one keyed pool (StreamPool/EventPool::PrewarmAsync):
// a queue of jobs run in order by one worker thread at a time, so that a pool
// prewarming for the process's life holds at most one thread. A worker ends
// when the queue is empty; the next Submit starts another and joins the
// finished one.

#ifndef GPUPOOL_SRC_POOLS_KEYED_PREWARM_H_
#define GPUPOOL_SRC_POOLS_KEYED_PREWARM_H_

#include <atomic>
#include <deque>
#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "src/lifetime/mutex.h"

namespace gpupool::internal {

class PrewarmQueue {
 public:
  PrewarmQueue() = default;
  PrewarmQueue(const PrewarmQueue&) = delete;
  PrewarmQueue& operator=(const PrewarmQueue&) = delete;
  ~PrewarmQueue() { Stop(); }

  // Queues `job`; false (not queued) once Stop was called.
  bool Submit(std::function<void()> job) {
    std::thread finished;  // a worker that ran out of jobs, joined below
    {
      MutexLock lock(&mu_);
      if (stopped_) return false;
      jobs_.push_back(std::move(job));
      if (!running_) {
        finished = std::move(worker_);
        worker_ = std::thread([this] { Run(); });
        running_ = true;
      }
    }
    if (finished.joinable()) finished.join();
    return true;
  }

  // Refuses further jobs, raises stop_flag() (the queued jobs see it and end
  // at once) and joins the worker. Idempotent.
  void Stop() {
    std::thread worker;
    {
      MutexLock lock(&mu_);
      stopped_ = true;
      worker = std::move(worker_);
    }
    stop_.store(true, std::memory_order_release);
    if (worker.joinable()) worker.join();
  }

  // Read by the jobs: true once Stop began.
  const std::atomic<bool>* stop_flag() const { return &stop_; }

 private:
  void Run() {
    for (;;) {
      std::function<void()> job;
      {
        MutexLock lock(&mu_);
        if (jobs_.empty()) {
          running_ = false;
          return;
        }
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  std::thread worker_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // worker_ still takes jobs
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> stop_{false};
};

}  // namespace gpupool::internal

#endif  // GPUPOOL_SRC_POOLS_KEYED_PREWARM_H_
