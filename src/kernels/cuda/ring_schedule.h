// Which producer warp issues which stage of a shared-memory ring (bulk::produce_stages): host and device, so the
// CPU tests can check the schedule against a model of the mbarrier parity waits (tests/kernels/ring_schedule_test.cc).
#pragma once

#ifdef __CUDACC__
#define QLM_RING_HOST_DEVICE __host__ __device__
#else
#define QLM_RING_HOST_DEVICE
#endif

namespace qlm::cuda {

// Producer warps that issue a ring of `stages` slots when `requested` are launched: at most one per slot (the
// warps beyond it issue nothing).
QLM_RING_HOST_DEVICE constexpr int ring_producer_warps(int requested, int stages) {
  const int warps = requested < stages ? requested : stages;
  return warps < 1 ? 1 : warps;
}

// The warp (of `warps`, as ring_producer_warps gives) that issues every use of ring slot `slot`. Each slot has one
// owner, which issued the slot's previous use after waiting for the release of the use before that, so its parity
// wait on the slot's empty barrier can never be met by a phase two behind, whatever order the consumers release
// stages in. (Handing stages out in turn instead, stage i to warp i mod warps, lets a slot's uses alternate between
// warps: with 3 warps on a 4-slot ring and two consumer groups a warp passed the wait for stage i while stage i - 8
// was still being read, and the stream kernel died with a launch failure.)
QLM_RING_HOST_DEVICE constexpr int ring_slot_producer(int slot, int warps) { return slot % warps; }

}  // namespace qlm::cuda

#undef QLM_RING_HOST_DEVICE
