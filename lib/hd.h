/* attnacc: what code written once for gcc and nvcc needs: AA_HD and the bit casts of fp32 and fp64 values. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_HD_H
#define AA_HD_H

#include <stdint.h>
#ifndef __CUDACC__
#include <string.h>
#endif

/* Host and device under nvcc, plain static inline in C. */
#ifdef __CUDACC__
#define AA_HD __host__ __device__
#else
#define AA_HD
#endif

/* The bits of an fp32 value and back (one instruction on the device). */
static inline AA_HD uint32_t aa_hd_f2u(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}
static inline AA_HD float aa_hd_u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/* The bits of an fp64 value and back. */
static inline AA_HD uint64_t aa_hd_d2u(double x) {
#ifdef __CUDA_ARCH__
  return (uint64_t)__double_as_longlong(x);
#else
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}
static inline AA_HD double aa_hd_u2d(uint64_t u) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double((long long)u);
#else
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/* For the host side of the CUDA files: make the calling thread's GPU current (lib/common.h aa_gpu_index: one per
   rank of a node, then per sweep worker); 0 when no device can be had. Every GPU entry point calls it first. */
#ifdef __CUDACC__
#include <cuda_runtime.h>
extern "C" int aa_gpu_index(int ndev);
static inline int aa_hd_use_gpu(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    cudaGetLastError(); /* clear the sticky "no device" error */
    return 0;
  }
  return cudaSetDevice(aa_gpu_index(n)) == cudaSuccess;
}
#endif

#endif
