/* attnacc: regression guard: every preset's output bits on a fixed set of small problems equal the stored checksums.
 */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "layout.h"
#include "tests.h"

/* A refactoring of the emulation must not move a bit. tests/tpresets pins each
   preset's text; this pins what the text computes: o, lse, dq, dk, dv (and
   dsinks) of every preset on the problems below, hashed (FNV-1a 64 over the
   binary64 encodings, in tensor order) and compared with
   tests/data/preset_bits.txt. The stored hashes were written by this
   program (`tests/tpreset_bits --write FILE`) from the tree whose bits the
   golden tests (fixtures/, tests/tkernel_gpu.sh) had already checked; a
   deliberate change of a preset's numerics rewrites its lines in the same
   commit and says why. A refusal is stored as such. */

typedef struct {
  const char *name;
  size_t n_q, n_k, d, heads, kv_heads;
  int causal;
  double sigma, softcap;
  size_t window, sinks;
  uint64_t seed;
} bits_problem_t;

static const bits_problem_t problems[] = {
    {"dense-70x70-d32", 70, 70, 32, 2, 2, 0, 1.0, 0, 0, 0, 1},
    {"causal-gqa-45x83-d24", 45, 83, 24, 4, 2, 1, 2.0, 0, 0, 0, 2},
    {"causal-130-d64-s3", 130, 130, 64, 1, 1, 1, 3.0, 0, 0, 0, 3},
    {"softcap-window-sinks-66x66-d16", 66, 66, 16, 2, 1, 1, 1.5, 20.0, 24, 2, 4},
    {"softcap-window-81x81-d48", 81, 81, 48, 2, 2, 1, 2.5, 30.0, 40, 0, 5},
};

static uint64_t fnv(uint64_t h, const aa_tensor_t *t) {
  size_t n = t->data != NULL ? aa_tensor_numel(t) : 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t u;
    memcpy(&u, &t->data[i], sizeof u);
    for (int b = 0; b < 8; b++) {
      h ^= (u >> (8 * b)) & 0xff;
      h *= UINT64_C(0x100000001b3);
    }
  }
  return h;
}

/* The line "PRESET PROBLEM HASH" (or "PRESET PROBLEM refused") of one run. */
static void run_one(char *line, size_t cap, const char *preset, const bits_problem_t *p) {
  aa_tensor_t q = {0}, k = {0}, v = {0}, dO = {0};
  aa_attn_result_t res;
  aa_recipe_t r;
  aa_problem_t pb;
  aa_error_t err = {{0}};
  double sinks[8];
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  if (aa_recipe_preset(&r, preset, &err) != AA_OK) {
    snprintf(line, cap, "%s %s lookup-failed", preset, p->name);
    return;
  }
  aa_problem_init(&pb, p->n_q, p->n_k, p->d, p->heads, p->kv_heads);
  pb.causal = p->causal;
  pb.softcap = p->softcap;
  pb.window = p->window;
  pb.num_sinks = p->sinks;
  for (size_t i = 0; i < p->heads * p->sinks; i++)
    sinks[i] = 0.25 * (double)i - 0.5;
  pb.sinks = p->sinks ? sinks : NULL;
  if (aa_layout_draw(&q, p->seed, 0, p->heads, p->n_q, p->d, AA_DIST_NORMAL, p->sigma, r.io_fmt, &err) ||
      aa_layout_draw(&k, p->seed, 1, p->kv_heads, p->n_k, p->d, AA_DIST_NORMAL, p->sigma, r.io_fmt, &err) ||
      aa_layout_draw(&v, p->seed, 2, p->kv_heads, p->n_k, p->d, AA_DIST_NORMAL, 1.0, r.io_fmt, &err) ||
      aa_layout_draw(&dO, p->seed, 3, p->heads, p->n_q, p->d, AA_DIST_NORMAL, 1.0, r.io_fmt, &err))
    snprintf(line, cap, "%s %s draw-failed", preset, p->name);
  else if (aa_attn_run(&res, &pb, &r, &q, &k, &v, &dO, &err) != AA_OK)
    snprintf(line, cap, "%s %s refused", preset, p->name);
  else {
    h = fnv(fnv(fnv(fnv(fnv(fnv(h, &res.o), &res.lse), &res.dq), &res.dk), &res.dv), &res.dsinks);
    snprintf(line, cap, "%s %s %016" PRIx64, preset, p->name, h);
    aa_attn_result_free(&res);
  }
  aa_tensor_free(&q);
  aa_tensor_free(&k);
  aa_tensor_free(&v);
  aa_tensor_free(&dO);
}

int main(int argc, char **argv) {
  const char *top = getenv("top_srcdir");
  char path[4096], line[512];
  int write = argc == 3 && !strcmp(argv[1], "--write");
  FILE *out = NULL;
  char *want = NULL;
  size_t lines = 0;
  if (write) {
    if ((out = fopen(argv[2], "w")) == NULL) {
      fprintf(stderr, "tpreset_bits: cannot write %s\n", argv[2]);
      return 2;
    }
  } else {
    snprintf(path, sizeof path, "%s/tests/data/preset_bits.txt", top != NULL ? top : ".");
    if ((want = aa_test_slurp(path)) == NULL) {
      AA_FAIL("no stored checksums %s", path);
      return aa_test_finish("tpreset_bits");
    }
  }
  for (size_t i = 0; i < aa_recipe_preset_count(); i++)
    for (size_t j = 0; j < sizeof problems / sizeof problems[0]; j++) {
      run_one(line, sizeof line, aa_recipe_preset_name(i), &problems[j]);
      lines++;
      if (write) {
        fprintf(out, "%s\n", line);
        continue;
      }
      /* the whole line, anchored at a line start and end */
      size_t ll = strlen(line);
      const char *at = want;
      int found = 0;
      while ((at = strstr(at, line)) != NULL && !found) {
        found = (at == want || at[-1] == '\n') && (at[ll] == '\n' || at[ll] == '\0');
        at++;
      }
      AA_CHECK(found, "%s: not the stored bits (tests/data/preset_bits.txt); a preset's numerics changed", line);
    }
  if (write) return fclose(out) == 0 ? 0 : 2;
  /* every stored line was produced: no preset or problem silently dropped */
  size_t stored = 0;
  for (const char *c = want; *c; c++)
    stored += *c == '\n';
  AA_CHECK(stored == lines, "the stored file has %zu lines, this build produced %zu", stored, lines);
  free(want);
  return aa_test_finish("tpreset_bits");
}
