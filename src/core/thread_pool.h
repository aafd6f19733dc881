// A small fixed-size thread pool for compute kernels: the calling thread plus (threads - 1) workers
// run the tasks of one parallel region; a region returns only when every task has finished.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qlm {

class ThreadPool {
 public:
  // `threads` >= 1 counts the caller; threads == 1 runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }

  // Calls fn(task) once for every task in [0, tasks), spread dynamically over the threads.
  // Regions are serialised; a region started from inside a task runs inline. The first exception a
  // task throws is rethrown here after all tasks have stopped.
  void run(int64_t tasks, const std::function<void(int64_t task)>& fn);

  // Splits [begin, end) into at most threads() contiguous chunks of at least `grain` items and
  // calls fn(chunk_begin, chunk_end) for each.
  void parallel_for(int64_t begin, int64_t end, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn);

  // CPUs this process may run on (its affinity mask), at least 1.
  static int available_cores();

 private:
  void worker_loop();
  void work_on_current_region();

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex region_mutex_;  // one region at a time

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stop_ = false;
  std::atomic<uint64_t> generation_{0};  // bumped when a region starts

  // The current region.
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> busy_workers_{0};
  std::exception_ptr error_;
};

// The process-wide pool kernels use. Its size is set_compute_threads(n) (n <= 0: available cores);
// changing the size replaces the pool, so do it between, not during, kernel runs.
ThreadPool& compute_pool();
void set_compute_threads(int threads);
int compute_threads();

}  // namespace qlm
