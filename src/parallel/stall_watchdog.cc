#include "parallel/stall_watchdog.h"

#include "core/error.h"

namespace qlm {

StallWatchdog::StallWatchdog(std::chrono::milliseconds timeout, std::function<void(double)> on_stall)
    : timeout_(timeout), on_stall_(std::move(on_stall)) {
  if (timeout_.count() <= 0 || !on_stall_)
    fail("tp.watchdog", {}, "pass a positive timeout and a callback", "stall watchdog with timeout {} ms",
         timeout_.count());
  thread_ = std::thread([this] { watch(); });
}

StallWatchdog::~StallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StallWatchdog::open() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (depth_++ > 0) return;
  since_ = Clock::now();
  ++section_;
  cv_.notify_all();
}

void StallWatchdog::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--depth_ > 0) return;
  since_.reset();
  cv_.notify_all();
}

void StallWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t fired = 0;  // the section the callback last ran for
  while (!stop_) {
    if (!since_ || section_ == fired) {
      cv_.wait(lock);
      continue;
    }
    const uint64_t section = section_;
    const Clock::time_point deadline = *since_ + timeout_;
    if (cv_.wait_until(lock, deadline, [&] { return stop_ || section_ != section || !since_; })) continue;
    fired = section;
    const double open_s = std::chrono::duration<double>(Clock::now() - *since_).count();
    lock.unlock();
    on_stall_(open_s);
    lock.lock();
  }
}

StallWatchdog::Guard::Guard(StallWatchdog* w) : w_(w) {
  if (w_) w_->open();
}

StallWatchdog::Guard::~Guard() {
  if (w_) w_->close();
}

}  // namespace qlm
