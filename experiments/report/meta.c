/* attnacc: what the report reads from a results folder besides results.csv: meta.json (experiment, grid, version,
 * recipe texts) and the provenance lines and plot footers built from it. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "attnacc.h"
#include "report/report.h"

/* A string member of a JSON object into out ("" when absent or not a string). */
static void copy_field(char *out, size_t cap, const json_t *obj, const char *key) {
  const char *v = json_string_value(json_object_get(obj, key));
  snprintf(out, cap, "%s", v ? v : "");
}

/* meta.json "recipes": [{"name": ..., "hash": ..., "text": ...}, ...]; an entry without the three strings ends the
   list (a file written by another tool). */
static void read_recipes(rp_meta_t *m, const json_t *doc) {
  const json_t *arr = json_object_get(doc, "recipes");
  size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
  if (n == 0 || (m->recipes = calloc(n, sizeof *m->recipes)) == NULL) return;
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(arr, i);
    const char *name = json_string_value(json_object_get(e, "name")),
               *hash = json_string_value(json_object_get(e, "hash")),
               *text = json_string_value(json_object_get(e, "text"));
    rp_recipe_meta_t *r = &m->recipes[m->nrecipes];
    if (name == NULL || hash == NULL || text == NULL) return;
    r->name = strdup(name), r->hash = strdup(hash), r->text = strdup(text);
    if (r->name == NULL || r->hash == NULL || r->text == NULL) {
      free(r->name), free(r->hash), free(r->text);
      return;
    }
    m->nrecipes++;
  }
}

void rp_meta_read(rp_meta_t *m, const char *dir) {
  char path[4200];
  json_t *doc;
  memset(m, 0, sizeof *m);
  snprintf(path, sizeof path, "%s/" AA_SWEEP_META_JSON, dir);
  if ((doc = json_load_file(path, 0, NULL)) == NULL) return;
  copy_field(m->experiment, sizeof m->experiment, doc, "experiment");
  copy_field(m->grid, sizeof m->grid, doc, "grid_hash");
  copy_field(m->version, sizeof m->version, doc, "version");
  copy_field(m->git, sizeof m->git, doc, "git");
  read_recipes(m, doc);
  json_decref(doc);
}

void rp_meta_free(rp_meta_t *m) {
  for (size_t i = 0; i < m->nrecipes; i++)
    free(m->recipes[i].name), free(m->recipes[i].hash), free(m->recipes[i].text);
  free(m->recipes);
  memset(m, 0, sizeof *m);
}

const rp_recipe_meta_t *rp_meta_recipe(const rp_meta_t *m, const char *name) {
  for (size_t i = 0; i < m->nrecipes; i++)
    if (strcmp(m->recipes[i].name, name) == 0) return &m->recipes[i];
  return NULL;
}

/* The text after its first line when that line is `name = ...` (aa_recipe_format writes name first). */
static const char *after_name(const char *t) {
  if (strncmp(t, "name = ", 7) != 0) return t;
  const char *nl = strchr(t, '\n');
  return nl ? nl + 1 : "";
}

int rp_meta_same_numerics(const char *text, const char *ref_text) {
  return strcmp(after_name(text), after_name(ref_text)) == 0;
}

const char *rp_preset_description(const char *name, const char *hash) {
  for (size_t i = 0; i < aa_recipe_preset_count(); i++) {
    aa_recipe_t r;
    aa_error_t err = {{0}};
    char probe[2], *text, hex[17];
    aa_hash128_t h;
    if (strcmp(aa_recipe_preset_name(i), name) != 0) continue;
    if (aa_recipe_preset(&r, name, &err) != AA_OK) return NULL;
    size_t need = aa_recipe_format(probe, sizeof probe, &r);
    if ((text = malloc(need + 1)) == NULL) return NULL;
    aa_recipe_format(text, need + 1, &r);
    aa_hash128_init(&h);
    aa_hash128_update(&h, text, strlen(text));
    free(text);
    /* the same 16 hex digits as xp_ctx_add_recipe writes to recipe_hash */
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h.lo);
    return strcmp(hex, hash) == 0 ? aa_recipe_preset_describe(i) : NULL;
  }
  return NULL;
}

/* The recipes of a results file with the first 8 hex digits of their text hash, "\n" escapes for gnuplot every
   per_line names; after max_lines lines the rest is counted, not listed. Returns the number of lines. */
static int recipe_list(char *out, size_t cap, const rp_strs_t *rec, const rp_strs_t *hash, size_t per_line,
                       int max_lines, int gnuplot) {
  size_t used = 0;
  int lines = 1;
  out[0] = '\0';
  for (size_t i = 0; i < rec->n; i++) {
    const char *sep = i == 0 ? "" : i % per_line ? ", " : gnuplot ? ",\\n" : ", ";
    const char *h = i < hash->n && hash->v[i] ? hash->v[i] : "?";
    int full = used + strlen(rec->v[i]) + 16 + 64 > cap;
    if (full || (i > 0 && i % per_line == 0 && gnuplot && ++lines > max_lines)) {
      /* the rest is counted, never dropped without a word */
      snprintf(out + used, cap - used, ", ... and %zu more (meta.json lists every recipe)", rec->n - i);
      if (!full) lines--;
      break;
    }
    used += (size_t)snprintf(out + used, cap - used, "%s%s [%.8s]", sep, rec->v[i], h);
  }
  return lines;
}

void rp_provenance(rp_prov_t *pv, const char *dir, const rp_meta_t *m, const aa_results_t *c) {
  int cr = aa_results_col(c, "recipe"), ch = aa_results_col(c, "recipe_hash"), cs = aa_results_col(c, "seed"),
      cv = aa_results_col(c, "version");
  rp_strs_t rec = {0}, hash = {0}, vers = {0};
  rp_nums_t seeds = {0};
  char gp[1700]; /* every recipe of up to ~60 fits: about nine footer lines once rp_gp_caption wraps it */
  memset(pv, 0, sizeof *pv);
  snprintf(pv->experiment, sizeof pv->experiment, "%s", m->experiment);
  snprintf(pv->grid, sizeof pv->grid, "%s", m->grid);
  for (size_t r = 0; r < c->nrows; r++) {
    size_t before = rec.n;
    if (cr >= 0 && rp_strs_add(&rec, aa_results_cell(c, r, cr)) >= 0 && rec.n > before) {
      /* hash[i] belongs to rec[i]: a repeated hash is stored again, not merged */
      char **g = realloc(hash.v, rec.n * sizeof *g);
      if (g != NULL) {
        hash.v = g;
        hash.v[hash.n++] = strdup(aa_results_cell(c, r, ch));
      }
    }
    if (cv >= 0) rp_strs_add(&vers, aa_results_cell(c, r, cv));
    if (cs >= 0) rp_nums_add(&seeds, aa_results_num(aa_results_cell(c, r, cs)));
  }
  recipe_list(pv->recipes_md, sizeof pv->recipes_md, &rec, &hash, 1000, 1, 0);
  int nl = recipe_list(gp, sizeof gp, &rec, &hash, 1000, 1, 0); /* one line: the plots wrap it to their width */
  if (vers.n > 0)
    snprintf(pv->version, sizeof pv->version, "%s%s", vers.v[0], vers.n > 1 ? " (and others)" : "");
  else
    snprintf(pv->version, sizeof pv->version, "%s+%s", m->version, m->git);
  if (seeds.n > 0)
    snprintf(pv->seeds, sizeof pv->seeds, "%g..%g (%zu seed(s); input streams from aa_cell_seed, column input_seed)",
             seeds.v[0], seeds.v[seeds.n - 1], seeds.n);
  else
    snprintf(pv->seeds, sizeof pv->seeds, "-");
  snprintf(pv->caption, sizeof pv->caption,
           "attnacc %.90s, %.60s (%.200s), seeds %g..%g, grid %.12s\\nrecipes [text hash]: %s", pv->version,
           pv->experiment[0] ? pv->experiment : "sweep", dir, seeds.n ? seeds.v[0] : 0,
           seeds.n ? seeds.v[seeds.n - 1] : 0, pv->grid, gp);
  pv->caption_lines = 1 + nl;
  rp_strs_free(&rec);
  rp_strs_free(&hash);
  rp_strs_free(&vers);
  rp_nums_free(&seeds);
}

void rp_prov_md(cli_sb_t *md, const rp_prov_t *pv, const char *dir) {
  cli_sb_printf(md, "- results: `%s/results.csv` (experiment `%s`, grid hash `%s`)\n", dir,
                pv->experiment[0] ? pv->experiment : "?", pv->grid[0] ? pv->grid : "?");
  cli_sb_printf(md,
                "- version: attnacc %s\n- seeds: %s\n- recipes [first 8 hex of the recipe text hash; full texts in "
                "meta.json]: %s\n\n",
                pv->version, pv->seeds, pv->recipes_md);
}
