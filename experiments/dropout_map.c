/* attnacc: the `dropout-map` command: where the backward mask redraw differs from the forward's, and its cost. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const cli_opt_t opts[] = {
    {"variant", "NAME", "nki", "preset recipe whose backward is emulated"},
    {"settings", "LIST", "all", "comma-separated settings (see below)"},
    {"p", "LIST", "0.05,0.1,0.2,0.5", "dropout probabilities"},
    {"n", "LIST", "128,256,384,512,640,1024,4096", "sequence lengths (n_q = n_k)"},
    {"d", "D", "64", "head dimension"},
    {"heads", "H", "1", "heads"},
    {"seed", "S", "1", "seed of the inputs (as attnacc run) and of the masks"},
    {"out", "FILE", NULL, "write the CSV to FILE (atomically) instead of stdout"},
    {"threads", "T", "0 = all", "threads for the oracle and the emulation"},
};

static const char usage_line[] = "[--variant NAME] [--settings LIST] [--p LIST] [--n LIST] [--out FILE]";
static const char description[] =
    "For every (setting, p, n): draw the inputs as `attnacc run` does (normal, sigma 1),\n"
    "draw the forward's dropout keep mask with the forward tiling and give it to the\n"
    "oracle, let the variant's emulated backward redraw the mask with its backward\n"
    "tiling, and write one CSV row: the fraction of mask bits the redraw got wrong,\n"
    "the realised and exact keep rates, the E[O] bias implied by the rescale, the\n"
    "rel_l2 and max_abs of o, dq, dk, dv against the oracle, and the same gradient\n"
    "errors of a backward given the forward's mask (consistent_*), so the cost of the\n"
    "mismatch is the difference of the two. Settings:\n"
    "  twin            tile-seeded, NKI twin tiling: forward 128 x 512 chunks, backward\n"
    "                  512-wide K tiles when n >= 512 else 128 (mismatch when n < 512)\n"
    "  twin-bwd128     tile-seeded, a backward that always uses 128-wide K tiles\n"
    "  twin-aligned    tile-seeded, a backward that always uses 512-wide K tiles\n"
    "  position-keyed  Philox keyed by (seed, batch, head, row, column): never mismatches\n"
    "  u8-threshold    FA2's byte threshold: never mismatches, keep rate (t+1)/256 != 1-p\n"
    "Lines starting with '#' record the version, git hash, seed and variant.";

static int setting_dropout(aa_dropout_t *d, const char *name) {
  aa_dropout_default(d);
  d->scheme = AA_DROPOUT_TILE_SEEDED;
  if (!strcmp(name, "twin")) return 1;
  if (!strcmp(name, "twin-bwd128")) {
    d->bwd_tile_k = d->bwd_tile_k_short = 128;
    return 1;
  }
  if (!strcmp(name, "twin-aligned")) {
    d->bwd_tile_k = d->bwd_tile_k_short = 512;
    return 1;
  }
  if (!strcmp(name, "position-keyed")) {
    d->scheme = AA_DROPOUT_POSITION_KEYED;
    return 1;
  }
  if (!strcmp(name, "u8-threshold")) {
    d->scheme = AA_DROPOUT_U8_THRESHOLD;
    return 1;
  }
  return 0;
}

/* Split a comma-separated list into at most max items (pointers into buf). */
static size_t split(char **items, size_t max, char *buf) {
  size_t n = 0;
  for (char *t = strtok(buf, ","); t != NULL && n < max; t = strtok(NULL, ","))
    items[n++] = t;
  return n;
}

/* Shortest of %.15g / %.17g that reads back as x (0.1 prints as 0.1). */
static void short_num(char *buf, size_t len, double x) {
  snprintf(buf, len, "%.15g", x);
  if (strtod(buf, NULL) != x) snprintf(buf, len, "%.17g", x);
}

static void csv_num(cli_sb_t *sb, double x) {
  if (isfinite(x))
    cli_sb_printf(sb, ",%.6g", x);
  else
    cli_sb_printf(sb, ",%s", isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf"));
}

int aa_cmd_dropout_map(int argc, char **argv) {
  const char *cmd = "dropout-map";
  cli_args_t a;
  aa_error_t err = {{0}};
  char setbuf[256], pbuf[256], nbuf[256];
  char *sets[16], *ps[16], *ns[16];
  size_t nset, np, nn, d = 64, heads = 1, threads = 0;
  uint64_t seed = 1;
  const char *s, *variant = "nki", *out_file;
  aa_recipe_t base;
  cli_sb_t sb = {0};
  int rc, status = 2;

  if ((rc = cli_args_parse(&a, cmd, usage_line, description, opts, sizeof opts / sizeof opts[0], argc, argv)) >= 0)
    return rc;
  if ((s = cli_get(&a, "variant")) != NULL) variant = s;
  if (aa_recipe_preset(&base, variant, &err) != AA_OK) {
    cli_error(cmd, "unknown variant '%s' (attnacc list shows the presets)", variant);
    return 2;
  }
  snprintf(setbuf, sizeof setbuf, "%s",
           (s = cli_get(&a, "settings")) ? s
                                         : "twin,twin-bwd128,twin-aligned,"
                                           "position-keyed,u8-threshold");
  snprintf(pbuf, sizeof pbuf, "%s", (s = cli_get(&a, "p")) ? s : "0.05,0.1,0.2,0.5");
  snprintf(nbuf, sizeof nbuf, "%s", (s = cli_get(&a, "n")) ? s : "128,256,384,512,640,1024,4096");
  nset = split(sets, 16, setbuf);
  np = split(ps, 16, pbuf);
  nn = split(ns, 16, nbuf);
  for (size_t i = 0; i < nset; i++) {
    aa_dropout_t t;
    if (!setting_dropout(&t, sets[i])) {
      cli_error(cmd,
                "--settings: unknown setting '%s' (twin, twin-bwd128, twin-aligned, position-keyed, "
                "u8-threshold)",
                sets[i]);
      return 2;
    }
  }
  double pv[16];
  size_t nv[16];
  for (size_t i = 0; i < np; i++)
    if (cli_double(&pv[i], cmd, "p", ps[i], 0, 1, 0) || pv[i] >= 1) {
      if (pv[i] >= 1) cli_error(cmd, "--p: %s is not below 1", ps[i]);
      return 2;
    }
  for (size_t i = 0; i < nn; i++)
    if (cli_size(&nv[i], cmd, "n", ns[i], 1, 1u << 20)) return 2;
  if ((s = cli_get(&a, "d")) && cli_size(&d, cmd, "d", s, 1, 4096)) return 2;
  if ((s = cli_get(&a, "heads")) && cli_size(&heads, cmd, "heads", s, 1, 1024)) return 2;
  if ((s = cli_get(&a, "seed")) && cli_u64(&seed, cmd, "seed", s)) return 2;
  if ((s = cli_get(&a, "threads")) && cli_size(&threads, cmd, "threads", s, 0, 4096)) return 2;
  out_file = cli_get(&a, "out");
  if (out_file != NULL && (rc = cli_check_out_file(out_file, &err)) != AA_OK) {
    cli_error(cmd, "%s", err.msg);
    return 2;
  }
  cli_set_threads(threads);

  cli_sb_printf(&sb, "# attnacc dropout-map, version %s, git %s, seed %llu, variant %s, d %zu, heads %zu\n",
                AA_VERSION, AA_GIT_HASH, (unsigned long long)seed, variant, d, heads);
  cli_sb_printf(&sb, "setting,scheme,p,n,fwd_tile_k,bwd_tile_k,mismatch_fraction,keep_rate,keep_expected,"
                     "o_bias_implied,rel_l2_o,rel_l2_dq,rel_l2_dk,rel_l2_dv,max_abs_dq,max_abs_dk,max_abs_dv,"
                     "consistent_rel_l2_dq,consistent_rel_l2_dk,consistent_rel_l2_dv,seconds\n");
  for (size_t in = 0; in < nn; in++) {
    size_t n = nv[in], total = heads * n * n;
    cli_inputs_t inp = {0};
    /* Settings that share a forward mask (the three tile-seeded ones share
       the forward tiling) share the oracle and the consistent-mask run:
       both depend on the inputs and the forward's mask only. */
    uint8_t *fwd = malloc(total), *bwd = malloc(total), *prev = malloc(total);
    aa_oracle_result_t orc;
    int have_orc = 0, have_cons = 0;
    double cons[3] = {0, 0, 0};
    memset(&orc, 0, sizeof orc);
    if (fwd == NULL || bwd == NULL || prev == NULL) {
      free(fwd);
      free(bwd);
      free(prev);
      cli_error(cmd, "out of memory");
      status = 1;
      goto out;
    }
    rc = cli_inputs_draw(&inp, seed, 0, 1.0, n, d, heads, heads, 0, base.io_fmt, &err);
    for (size_t ip = 0; ip < np && rc == AA_OK; ip++)
      for (size_t is = 0; is < nset && rc == AA_OK; is++) {
        aa_dropout_t dd;
        aa_problem_t pb;
        aa_recipe_t r = base, rcons = base;
        cli_variant_t v, vc;
        aa_attn_result_t res;
        size_t ftq, ftk, btq, btk, mis;
        double t0 = cli_now(), ks = 1;
        memset(&v, 0, sizeof v);
        memset(&vc, 0, sizeof vc);
        setting_dropout(&dd, sets[is]);
        dd.p = pv[ip];
        dd.seed = seed;
        rc = aa_dropout_mask_fwd(fwd, &ks, &dd, heads, n, n, &err);
        if (rc == AA_OK) rc = aa_dropout_mask_bwd(bwd, NULL, &dd, heads, n, n, &err);
        if (rc != AA_OK) break;
        aa_dropout_fwd_tiles(&ftq, &ftk, &dd, n, n);
        aa_dropout_bwd_tiles(&btq, &btk, &dd, n, n);
        aa_problem_init(&pb, n, n, d, heads, heads);
        pb.keep = fwd;
        pb.keep_scale = ks;
        if (have_orc && memcmp(prev, fwd, total) != 0) {
          aa_oracle_result_free(&orc);
          have_orc = have_cons = 0;
        }
        if (!have_orc) {
          aa_oracle_opts_t oo;
          aa_oracle_opts_init(&oo);
          oo.threads = (int)threads;
          if ((rc = aa_oracle_run(&orc, &pb, &inp.q, &inp.k, &inp.v, &inp.dO, &oo, &err)) != AA_OK) break;
          have_orc = 1;
          memcpy(prev, fwd, total);
        }
        /* The variant redraws with its backward tiling (recipe dropout);
           the consistent run reuses the forward's mask (recipe dropout none:
           problem.keep in both passes). Identical masks give identical
           runs, so the consistent run is only done after a mismatch. */
        r.dropout = dd;
        mis = aa_dropout_mismatch_count(fwd, bwd, total);
        rc = cli_run_variant(&v, &res, &r, &pb, &inp, &orc, &err);
        aa_attn_result_free(&res);
        if (rc == AA_OK && mis == 0 && !have_cons) {
          for (int j = 0; j < 3; j++)
            cons[j] = v.out[j + 1].m.rel_l2;
          have_cons = 1;
        }
        if (rc == AA_OK && !have_cons) {
          aa_dropout_default(&rcons.dropout);
          rc = cli_run_variant(&vc, &res, &rcons, &pb, &inp, &orc, &err);
          aa_attn_result_free(&res);
          if (rc == AA_OK) {
            for (int j = 0; j < 3; j++)
              cons[j] = vc.out[j + 1].m.rel_l2;
            have_cons = 1;
          }
        }
        if (rc == AA_OK) {
          double mf = aa_dropout_mismatch(fwd, bwd, total);
          char pt[32];
          short_num(pt, sizeof pt, dd.p);
          cli_sb_printf(&sb, "%s,%s,%s,%zu,%zu,%zu", sets[is], aa_dropout_scheme_name(dd.scheme), pt, n, ftk, btk);
          csv_num(&sb, mf);
          csv_num(&sb, aa_dropout_keep_rate(fwd, total));
          csv_num(&sb, aa_dropout_expected_keep(&dd));
          csv_num(&sb, aa_dropout_implied_bias(&dd));
          for (int j = 0; j < 4; j++)
            csv_num(&sb, v.out[j].m.rel_l2);
          for (int j = 1; j < 4; j++)
            csv_num(&sb, v.out[j].m.max_abs);
          for (int j = 0; j < 3; j++)
            csv_num(&sb, cons[j]);
          csv_num(&sb, cli_now() - t0);
          cli_sb_printf(&sb, "\n");
          if (out_file != NULL)
            fprintf(stderr, "dropout-map: %s p %g n %zu: mismatch %.4f, rel_l2 dq %.3g (consistent %.3g), %.1f s\n",
                    sets[is], dd.p, n, mf, v.out[1].m.rel_l2, cons[0], cli_now() - t0);
        }
        cli_variant_free(&v);
        cli_variant_free(&vc);
      }
    if (have_orc) aa_oracle_result_free(&orc);
    free(fwd);
    free(bwd);
    free(prev);
    cli_inputs_free(&inp);
    if (rc != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      status = cli_exit_status(rc);
      goto out;
    }
  }
  if (sb.oom) {
    cli_error(cmd, "out of memory");
    status = 1;
    goto out;
  }
  if (out_file != NULL) {
    if ((rc = cli_write_atomic(out_file, sb.buf, sb.len, &err)) != AA_OK) {
      cli_error(cmd, "%s", err.msg);
      status = 1;
      goto out;
    }
  } else
    fwrite(sb.buf, 1, sb.len, stdout);
  status = 0;
out:
  cli_sb_free(&sb);
  return status;
}
