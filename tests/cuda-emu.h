/* attnacc: what of CUDA the kernels' device code uses, for the host compiler: a block as one std::thread per CUDA
 * thread, __syncthreads a barrier of them (tests/tgemm_cuda_emu.cpp, tests/toracle_cuda_emu.cpp). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_TESTS_CUDA_EMU_H
#define AA_TESTS_CUDA_EMU_H

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

/* A block's __shared__ arrays are the kernel's static variables (one block runs at a time); threadIdx is each
   thread's own. */
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct float4 {
  float x, y, z, w;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct int4 {
  int x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct double2 {
  double x, y;
};
static thread_local dim3 threadIdx;
static dim3 blockIdx, blockDim;

class emu_barrier {
  std::mutex mu;
  std::condition_variable cv;
  int n, waiting = 0;
  unsigned long phase = 0;

public:
  explicit emu_barrier(int count) : n(count) {}
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    unsigned long ph = phase;
    if (++waiting == n) {
      waiting = 0, phase++;
      cv.notify_all();
    } else
      cv.wait(lk, [&] { return phase != ph; });
  }
};
static emu_barrier *emu_bar;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
#define __syncthreads() emu_bar->wait()
using std::max;
using std::min;

/* One launch: the blocks of the grid in turn (x fastest), each on block.x * block.y threads. */
template <typename F> static void emu_launch(dim3 grid, dim3 block, F kern) {
  blockDim = block;
  for (unsigned bz = 0; bz < grid.z; bz++)
    for (unsigned by = 0; by < grid.y; by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        blockIdx = dim3(bx, by, bz);
        emu_barrier bar((int)(block.x * block.y));
        emu_bar = &bar;
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < block.x * block.y; t++)
          ts.emplace_back([=] {
            threadIdx = dim3(t % block.x, t / block.x);
            kern();
          });
        for (auto &t : ts)
          t.join();
      }
}

#endif
