// A watchdog over sections of work that must end within a time limit. A rank of a multi-process
// tensor-parallel group waits inside NCCL for ever when another rank has died (NCCL has no time
// limit and does not notice a dead peer on one host); a section open longer than `timeout` makes
// `on_stall(seconds open)` run once, on the watchdog's own thread, where the caller reports and ends
// the process. Sections nest (the outermost one counts); opening and closing one is a lock and a
// notify, cheap beside a forward step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace qlm {

class StallWatchdog {
 public:
  StallWatchdog(std::chrono::milliseconds timeout, std::function<void(double seconds)> on_stall);
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // Opens a section for the guard's lifetime; a null watchdog makes it a no-op.
  class Guard {
   public:
    explicit Guard(StallWatchdog* w);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    StallWatchdog* w_;
  };

 private:
  using Clock = std::chrono::steady_clock;
  void open();
  void close();
  void watch();

  const std::chrono::milliseconds timeout_;
  const std::function<void(double)> on_stall_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int depth_ = 0;
  uint64_t section_ = 0;  // counts outermost sections, so a stall fires once per section
  std::optional<Clock::time_point> since_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace qlm
