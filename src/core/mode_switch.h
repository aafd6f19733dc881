// A three-way switch for a code path that has a built-in rule: 1 runs the path wherever it applies, 0 never,
// -1 leaves the choice to the rule. Tests and tools force a mode for the process (`force`, -1 hands the
// choice back); otherwise the environment variable named at construction decides, read on first use
// (docs/cli.md, "Environment variables"); unset or empty means -1. Like env_switch.h, it changes which
// code runs, never what a layer computes. Header-only and free of qlm types (CUDA sources use it).
#pragma once

#include <atomic>
#include <climits>

#include "core/env_switch.h"

namespace qlm {

class ModeSwitch {
 public:
  explicit ModeSwitch(const char* env_name) : env_name_(env_name) {}
  ModeSwitch(const ModeSwitch&) = delete;
  ModeSwitch& operator=(const ModeSwitch&) = delete;

  void force(int mode) { forced_.store(mode); }

  // The forced mode where one is set, else the environment's (-1 without one).
  int mode() const {
    const int forced = forced_.load();
    if (forced >= 0) return forced;
    int from_env = from_env_.load();
    if (from_env == kUnread) {
      from_env = static_cast<int>(env_int(env_name_, -1));
      from_env_.store(from_env);  // a race stores the same value twice
    }
    return from_env;
  }

 private:
  static constexpr int kUnread = INT_MIN;
  const char* env_name_;
  std::atomic<int> forced_{-1};
  mutable std::atomic<int> from_env_{kUnread};
};

}  // namespace qlm
