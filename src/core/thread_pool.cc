#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <memory>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define QLM_CPU_RELAX() _mm_pause()
#else
#define QLM_CPU_RELAX() std::this_thread::yield()
#endif

namespace qlm {
namespace {

// A worker spins this many relax iterations (tens of microseconds) before it sleeps, so that
// back-to-back kernel calls do not pay a futex wake-up each.
constexpr int kSpinIterations = 4000;

thread_local bool t_inside_region = false;

}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
  workers_.reserve(threads_ - 1);
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

int ThreadPool::available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

void ThreadPool::work_on_current_region() {
  bool was_inside = t_inside_region;
  t_inside_region = true;
  for (;;) {
    int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= tasks_) break;
    try {
      (*fn_)(task);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_task_.store(tasks_, std::memory_order_relaxed);  // the others stop taking tasks
    }
  }
  t_inside_region = was_inside;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    bool started = false;
    for (int i = 0; i < kSpinIterations; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen) {
        started = true;
        break;
      }
      QLM_CPU_RELAX();
    }
    if (!started) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    work_on_current_region();
    if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);
      done_.notify_all();
    }
  }
}

void ThreadPool::run(int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (tasks <= 0) return;
  if (threads_ == 1 || tasks == 1 || t_inside_region) {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  std::lock_guard region(region_mutex_);
  {
    std::lock_guard lock(mutex_);
    fn_ = &fn;
    tasks_ = tasks;
    error_ = nullptr;
    next_task_.store(0, std::memory_order_relaxed);
    busy_workers_.store(threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  work_on_current_region();
  bool finished = false;
  for (int i = 0; i < kSpinIterations && !finished; ++i) {
    finished = busy_workers_.load(std::memory_order_acquire) == 0;
    if (!finished) QLM_CPU_RELAX();
  }
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return busy_workers_.load(std::memory_order_acquire) == 0; });
  fn_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::parallel_for(int64_t begin, int64_t end, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t chunks = std::clamp<int64_t>(n / grain, 1, threads_);
  run(chunks, [&](int64_t c) {
    int64_t b = begin + n * c / chunks;
    int64_t e = begin + n * (c + 1) / chunks;
    if (b < e) fn(b, e);
  });
}

namespace {
std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;
}  // namespace

ThreadPool& compute_pool() {
  std::lock_guard lock(g_pool_mutex);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(ThreadPool::available_cores());
  return *g_pool;
}

void set_compute_threads(int threads) {
  int n = threads > 0 ? threads : ThreadPool::available_cores();
  std::lock_guard lock(g_pool_mutex);
  if (g_pool && g_pool->threads() == n) return;
  g_pool.reset();
  g_pool = std::make_unique<ThreadPool>(n);
}

int compute_threads() { return compute_pool().threads(); }

}  // namespace qlm
