/* attnacc: umbrella header including every public module header. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_ATTNACC_H
#define AA_ATTNACC_H

#include "attn.h"
#include "batch.h"
#include "common.h"
#include "dropout.h"
#include "exp.h"
#include "fmt.h"
#include "gemm.h"
#include "layout.h"
#include "metrics.h"
#include "npy.h"
#include "oracle.h"
#include "problem.h"
#include "recipe.h"
#include "reduce.h"
#include "rng.h"
#include "score.h"
#include "sweep.h"
#include "tensor.h"
#include "version.h"

#endif
