/* attnacc: names and one-line descriptions of the gemm accumulation models. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <string.h>

#include "gemm.h"

static const char *const names[AA_ACC_COUNT] = {"fp32-seq",       "fp32-pairwise",  "fp64-seq",
                                                "tc-k16-f25",     "tc-k8-f24",      "tc-k4-f23",
                                                "tc-fp8-k32-f13", "tc-fp8-k32-f25", "cdna3-k8-f24"};

static const char *const descriptions[AA_ACC_COUNT] = {
    "fp32 FMA chain in k order, acc = fmaf(a_k, b_k, acc) from the incoming C or +0 (CPU/scalar accumulator)",
    "fp32 products, summed by a fixed pairwise tree (left block = largest power of two below n), then added to C",
    "fp64 FMA chain in k order from the incoming C or +0 (near-exact reference products)",
    "tensor core H100/H200/B200: blocks of 16 exact products + fp32 acc aligned to the largest exponent (zeros "
    "ignored), truncated to 25 fractional bits, exact sum, RZ to fp32 (subnormals kept, overflow FLT_MAX)",
    "tensor core A100/Ada: blocks of 8 exact products + fp32 acc aligned to the largest exponent (zeros ignored), "
    "truncated to 24 fractional bits, exact sum, RZ to fp32 (subnormals kept, overflow FLT_MAX)",
    "tensor core V100 (fp16 HMMA): blocks of 4 exact products + fp32 acc aligned to the largest exponent, "
    "truncated to 23 fractional bits, exact sum, RZ to fp32 (Fasi et al. 2021; MMA-Sim nv_ptx.py:18)",
    "tensor core H100/H200 FP8 wgmma: blocks of 32 exact products + fp32 acc aligned to the largest exponent, "
    "truncated to 13 fractional bits, exact sum, RZ to e8m13 (MMA-Sim nv_ptx.py:153-159)",
    "tensor core B200 FP8 tcgen05: blocks of 32 exact products + fp32 acc aligned to the largest exponent, "
    "truncated to 25 fractional bits, exact sum, RZ to fp32 (MMA-Sim nv_ptx.py:186-190)",
    "AMD MI300 (CDNA3) bf16/fp16 MFMA: groups of 8 products truncated to 24 bits below the largest e_a+e_b, "
    "then sum and acc rounded down to 31/24 bits below the larger exponent, RNE to fp32 (MMA-Sim amd.py:39-43)",
};

const char *aa_accum_name(aa_accum_t model) {
  return (unsigned)model < AA_ACC_COUNT ? names[model] : "unknown";
}

int aa_accum_from_name(aa_accum_t *out, const char *name) {
  int m = aa_name_index(name, names, AA_ACC_COUNT);
  if (m < 0) return AA_ENOTFOUND;
  if (out != NULL) *out = (aa_accum_t)m;
  return AA_OK;
}

const char *aa_accum_describe(aa_accum_t model) {
  return (unsigned)model < AA_ACC_COUNT ? descriptions[model] : "unknown accumulation model";
}
