/* attnacc: umbrella header including every public module header. */
#ifndef AA_ATTNACC_H
#define AA_ATTNACC_H

#include "common.h"
#include "version.h"
#include "rng.h"
#include "fmt.h"
#include "tensor.h"
#include "npy.h"
#include "problem.h"
#include "gemm.h"
#include "oracle.h"
#include "recipe.h"
#include "attn.h"
#include "metrics.h"
#include "exp.h"
#include "sweep.h"
#include "reduce.h"
#include "dropout.h"

#endif
