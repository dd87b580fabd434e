/* attnacc: the table of gemm accumulation models (one row per model) and the name <-> enum lookups on it. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <string.h>

#include "gemm.h"

/* The definitions of each alignment rule are in gemm.h. Block lengths and
   fractional bits are MMA-Sim's (microsoft/MMA-Sim at c785138,
   mmasim/simulator/nv_ptx.py:17-26: Volta 23 fractional bits, Ampere/Ada
   24, Hopper/Blackwell 25; :147-159: Hopper wgmma fuses the instruction's
   whole k, 16 for bf16/fp16 and 32 for FP8, and FP8 keeps 13 bits with an
   e8m13 result; :186-190: Blackwell tcgen05 keeps 25 bits, FP8 included,
   k = 32 for kind::f8f6f4; amd.py:39-43 CDNA3 groups of 8) and Fasi et al.
   2021's for V100's k = 4 ([mma-sim] in REFERENCES.md). A100's m16n8k16
   runs as two k = 8 halves (nv_ptx.py:35-44, 73-87), hence blocks of 8. */
/* The fields of AA_SUM_PROMOTED (promote_k .. out_ebits) in the other rows: unused, zero, fp32's range. */
#define NOT_PROMOTED 0, 0, 0, AA_RND_NE, 0
const aa_accum_info_t aa_accum_table[AA_ACC_COUNT] = {
    {AA_ACC_FP32_SEQ, "fp32-seq", AA_SUM_CHAIN, 0, 0, 23, AA_RND_NE,
     "fp32 FMA chain in k order, acc = fmaf(a_k, b_k, acc) from the incoming C or +0 (CPU/scalar accumulator)", "",
     NOT_PROMOTED, 0, 0},
    {AA_ACC_FP32_PAIRWISE, "fp32-pairwise", AA_SUM_PAIRWISE, 0, 0, 23, AA_RND_NE,
     "fp32 products, summed by a fixed pairwise tree (left block = largest power of two below n), then added to C",
     "", NOT_PROMOTED, 0, 0},
    {AA_ACC_FP64_SEQ, "fp64-seq", AA_SUM_CHAIN, 0, 0, 52, AA_RND_NE,
     "fp64 FMA chain in k order from the incoming C or +0 (near-exact reference products)", "", NOT_PROMOTED, 0, 0},
    {AA_ACC_TC_K16_F25, "tc-k16-f25", AA_SUM_BLOCK, 16, 25, 23, AA_RND_Z,
     "tensor core H100/H200/B200: blocks of 16 exact products + fp32 acc aligned to the largest exponent (zeros "
     "ignored), truncated to 25 fractional bits, exact sum, RZ to fp32 (subnormals kept, overflow +-Inf as on the "
     "H200, [h200-orders] (4))",
     "mma-sim", NOT_PROMOTED, 0, 0},
    {AA_ACC_TC_K8_F24, "tc-k8-f24", AA_SUM_BLOCK, 8, 24, 23, AA_RND_Z,
     "tensor core A100/Ada: blocks of 8 exact products + fp32 acc aligned to the largest exponent (zeros ignored), "
     "truncated to 24 fractional bits, exact sum, RZ to fp32 (subnormals kept, overflow +-Inf, as measured on the "
     "H200 only: [h200-orders] (4))",
     "mma-sim", NOT_PROMOTED, 0, 0},
    {AA_ACC_TC_K4_F23, "tc-k4-f23", AA_SUM_BLOCK, 4, 23, 23, AA_RND_Z,
     "tensor core V100 (fp16 HMMA): blocks of 4 exact products + fp32 acc aligned to the largest exponent, "
     "truncated to 23 fractional bits, exact sum, RZ to fp32, overflow +-Inf as measured on the H200 only "
     "([h200-orders] (4); Fasi et al. 2021; MMA-Sim nv_ptx.py:18)",
     "mma-sim", NOT_PROMOTED, 0, 0},
    {AA_ACC_TC_FP8_K32_F13, "tc-fp8-k32-f13", AA_SUM_BLOCK, 32, 13, 13, AA_RND_Z,
     "tensor core H100/H200 FP8 wgmma: blocks of 32 exact products + fp32 acc aligned to the largest exponent, "
     "truncated to 13 fractional bits, exact sum, RZ to e8m13 (MMA-Sim nv_ptx.py:153-159)",
     "mma-sim", NOT_PROMOTED, 0, 0},
    {AA_ACC_TC_FP8_K32_F25, "tc-fp8-k32-f25", AA_SUM_BLOCK, 32, 25, 23, AA_RND_Z,
     "tensor core B200 FP8 tcgen05: blocks of 32 exact products + fp32 acc aligned to the largest exponent, "
     "truncated to 25 fractional bits, exact sum, RZ to fp32 (MMA-Sim nv_ptx.py:186-190)",
     "mma-sim", NOT_PROMOTED, 0, 0},
    {AA_ACC_CDNA3_K8_F24, "cdna3-k8-f24", AA_SUM_BLOCK2, 8, 24, 23, AA_RND_NE,
     "AMD MI300 (CDNA3) bf16/fp16 MFMA: groups of 8 products truncated to 24 bits below the largest e_a+e_b, "
     "then sum and acc rounded down to 31/24 bits below the larger exponent, RNE to fp32 (MMA-Sim amd.py:39-43)",
     "mma-sim", NOT_PROMOTED, 0, 0},
    /* The promoted rows, fitted to H200 data ([h200-fp8]: fixtures/h200-fp8, experiments/README-gpu.md "FP8 on
       the H200"). The sm90 mma.sync rows follow the SASS (F2FP unpacks E4M3 to FP16; two HMMA.16816 from zero
       over k mod 4 in {0, 1} then {2, 3}; an FADD/HADD2 of C), each HMMA being tc-k16-f25 ([mma-sim]
       nv_ptx.py:17-26) or, for the f16 form, its sum rounded to nearest fp16 (arithmetic.py:183-188); the p128
       row is MMA-Sim's Hopper FP8 wgmma (nv_ptx.py:147-159) with the promotion of the partial sums into fp32
       every 128 k that [cublas-fp8] describes and the H200 data fix. */
    {AA_ACC_SM90_FP8_MMA_F32, "sm90-fp8-mma-f32", AA_SUM_PROMOTED, 16, 25, 23, AA_RND_NE,
     "H100/H200 FP8 mma.sync m16n8k32 (f32): two tc-k16-f25 HMMAs from +0 over k mod 4 in {0,1} then {2,3}, "
     "then C + D by an fp32 add (RNE)",
     "h200-fp8", 32, 2, 23, AA_RND_Z, 0, 0, 0},
    {AA_ACC_SM90_FP8_MMA_F16, "sm90-fp8-mma-f16", AA_SUM_PROMOTED, 16, 25, 10, AA_RND_NE,
     "H100/H200 FP8 mma.sync m16n8k32 (f16 accumulate): two HMMA.F16 (25 fractional bits, RNE to fp16) from +0 "
     "over k mod 4 in {0,1} then {2,3}, then C + D by an fp16 add (RNE); fp16 result",
     "h200-fp8", 32, 2, 10, AA_RND_NE, 5, 0, 0},
    {AA_ACC_TC_FP8_K32_F13_P128, "tc-fp8-k32-f13-p128", AA_SUM_PROMOTED, 32, 13, 23, AA_RND_NE,
     "cuBLASLt FP8 GEMM without fast accumulation (torch._scaled_mm, H100/H200): chunks of 128 k summed by "
     "tc-fp8-k32-f13 from +0, each added into an fp32 accumulator (RNE)",
     "cublas-fp8", 128, 32, 13, AA_RND_Z, 0, 0, 0},
    /* Blackwell block-scaled MMA: MMA-Sim nv_ptx.py:103 and :223 (35 fractional bits for k = 64, else 25),
       :122-142 and :242-262 (mxf8f6f4 one term per product, mxf4nvf4 one per 16), arithmetic.py:206-224;
       NVFP4 scales UE4M3 per 16, MXFP4 E8M0 per 32 (PTX ISA kind::mxf4nvf4 scale_vec) */
    {AA_ACC_TC_MXFP8_K32_F25, "tc-mxfp8-k32-f25", AA_SUM_SCALED, 32, 25, 23, AA_RND_Z,
     "tensor core B200 MXFP8 (kind::mxf8f6f4): blocks of 32 exact products scaled by E8M0 per 32, aligned to the "
     "largest e(a)+e(b)+e(sa)+e(sb), truncated to 25 fractional bits, RZ to fp32 (MMA-Sim nv_ptx.py:220-251)",
     "mma-sim", NOT_PROMOTED, 32, -127},
    {AA_ACC_TC_MXFP4_K64_F35, "tc-mxfp4-k64-f35", AA_SUM_SCALED, 64, 35, 23, AA_RND_Z,
     "tensor core B200 MXFP4 (kind::mxf4nvf4): exact sums of 16 E2M1 products times E8M0 scales per 32, aligned "
     "to the largest e(sa)+e(sb), truncated to 35 fractional bits, RZ to fp32 (MMA-Sim arithmetic.py:196-224)",
     "mma-sim", NOT_PROMOTED, 32, -127},
    {AA_ACC_TC_NVFP4_K64_F35, "tc-nvfp4-k64-f35", AA_SUM_SCALED, 64, 35, 23, AA_RND_Z,
     "tensor core B200 NVFP4 (kind::mxf4nvf4): exact sums of 16 E2M1 products times UE4M3 scales per 16, aligned "
     "to the largest e(sa)+e(sb), truncated to 35 fractional bits, RZ to fp32 (MMA-Sim arithmetic.py:196-224)",
     "mma-sim", NOT_PROMOTED, 16, -6},
    {AA_ACC_TC_K8_F25, "tc-k8-f25", AA_SUM_BLOCK, 8, 25, 23, AA_RND_Z,
     "tensor core H100/H200 mma.sync m16n8k8 (HMMA.1688): blocks of 8 exact products + fp32 acc aligned to the "
     "largest exponent, truncated to 25 fractional bits, exact sum, RZ to fp32 (the mem-efficient backward's every "
     "GEMM on the H200: experiments/README-gpu.md 8.8)",
     "mma-sim", NOT_PROMOTED, 0, 0},
};

const aa_accum_info_t *aa_accum_info(aa_accum_t model) {
  return (unsigned)model < AA_ACC_COUNT ? &aa_accum_table[model] : NULL;
}

const char *aa_accum_name(aa_accum_t model) {
  return (unsigned)model < AA_ACC_COUNT ? aa_accum_table[model].name : "unknown";
}

int aa_accum_from_name(aa_accum_t *out, const char *name) {
  for (int m = 0; name != NULL && m < AA_ACC_COUNT; m++)
    if (strcmp(name, aa_accum_table[m].name) == 0) {
      if (out != NULL) *out = (aa_accum_t)m;
      return AA_OK;
    }
  return AA_ENOTFOUND;
}

const char *aa_accum_describe(aa_accum_t model) {
  return (unsigned)model < AA_ACC_COUNT ? aa_accum_table[model].description : "unknown accumulation model";
}

int aa_accum_tc_params(aa_accum_t model, int *block_k, int *frac_bits) {
  const aa_accum_info_t *m = aa_accum_info(model);
  if (m == NULL || (m->sum != AA_SUM_BLOCK && m->sum != AA_SUM_BLOCK2 && m->sum != AA_SUM_PROMOTED))
    return AA_ENOTFOUND;
  if (block_k != NULL) *block_k = m->block_k;
  if (frac_bits != NULL) *frac_bits = m->frac_bits;
  return AA_OK;
}

int aa_accum_native(aa_accum_t model, aa_fmt_t f) {
  const aa_accum_info_t *m = aa_accum_info(model);
  if (m == NULL) return 0;
  if (m->out_ebits == 5) return f == AA_FMT_FP16 || f == AA_FMT_FP32; /* fp16 results */
  return (f == AA_FMT_FP32 && m->out_bits <= 23) || (f == AA_FMT_FP64 && m->out_bits == 52);
}
