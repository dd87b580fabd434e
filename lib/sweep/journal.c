/* attnacc: reading sweep journals (complete cells only), merging them, and writing the canonical results files. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json.h"
#include "internal.h"

void aa__set_free(aa_sweep_set_t *set) {
  for (size_t i = 0; i < set->nrecs; i++)
    free(set->recs[i].text);
  free(set->recs);
  if (set->colnames != NULL)
    for (size_t c = 0; c < set->ncols; c++)
      free(set->colnames[c]);
  free(set->colnames);
  free(set->colkind);
  free(set->header);
  *set = (aa_sweep_set_t){0};
}

static int parse_hex128(aa_hash128_t *h, const char *s) {
  uint64_t part[2] = {0, 0};
  for (int i = 0; i < 32; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return 0;
    part[i / 16] = part[i / 16] << 4 | (uint64_t)d;
  }
  h->hi = part[0];
  h->lo = part[1];
  return 1;
}

/* "#aasweep 1 grid=<32 hex> cells=<n> cols=<name>:<k>,...\n" */
int aa__parse_header(aa_sweep_set_t *set, const char *line, size_t len) {
  char *s = malloc(len + 1);
  if (s == NULL) return 0;
  memcpy(s, line, len);
  s[len] = '\0';
  if (len > 0 && s[len - 1] == '\n') s[len - 1] = '\0';
  char *g = strstr(s, " grid="), *c = strstr(s, " cells="), *k = strstr(s, " cols=");
  int ok = strncmp(s, "#aasweep 1 ", 11) == 0 && g && c && k && parse_hex128(&set->grid, g + 6);
  if (ok) {
    char *end;
    set->ncells = strtoull(c + 7, &end, 10);
    ok = end != c + 7;
  }
  size_t n = 0;
  char *cols = ok ? k + 6 : NULL;
  if (ok) {
    n = 1;
    for (char *p = cols; *p; p++)
      n += *p == ',';
    set->colnames = calloc(n, sizeof *set->colnames);
    set->colkind = calloc(n + 1, 1);
    ok = set->colnames != NULL && set->colkind != NULL;
  }
  for (size_t i = 0; ok && i < n; i++) {
    char *next = strchr(cols, ',');
    if (next) *next = '\0';
    char *colon = strrchr(cols, ':');
    if (colon == NULL || (colon[1] != 'c' && colon[1] != 'm' && colon[1] != 't') || colon[2] != '\0') {
      ok = 0;
      break;
    }
    *colon = '\0';
    set->colnames[i] = strdup(cols);
    set->colkind[i] = colon[1];
    set->ncols = i + 1;
    if (set->colnames[i] == NULL) ok = 0;
    cols = next ? next + 1 : cols + strlen(cols);
  }
  free(s);
  if (ok) {
    set->header = malloc(len + 1);
    if (set->header == NULL) return 0;
    memcpy(set->header, line, len);
    set->header[len] = '\0';
  }
  return ok;
}

static int add_rec(aa_sweep_set_t *set, size_t index, aa_hash128_t id, size_t nrows, const char *text, size_t len) {
  if (set->nrecs == set->cap) {
    size_t cap = set->cap ? 2 * set->cap : 64;
    aa_sweep_rec_t *r = realloc(set->recs, cap * sizeof *r);
    if (r == NULL) return 0;
    set->recs = r;
    set->cap = cap;
  }
  char *t = malloc(len + 1);
  if (t == NULL) return 0;
  memcpy(t, text, len);
  t[len] = '\0';
  set->recs[set->nrecs++] = (aa_sweep_rec_t){index, id, nrows, t, len};
  return 1;
}

int aa__journal_parse(aa_sweep_set_t *set, const char *data, size_t len, size_t *valid_end, const char *path,
                      aa_error_t *err) {
  *valid_end = 0;
  const char *nl = memchr(data, '\n', len);
  if (nl == NULL) return AA_OK; /* empty, or a header cut short: nothing complete */
  size_t hlen = (size_t)(nl - data) + 1;
  if (set->header == NULL) {
    if (!aa__parse_header(set, data, hlen))
      return aa_error_set(err, AA_EFORMAT, "%s: not a sweep journal (bad header line)", path);
  } else if (strlen(set->header) != hlen || memcmp(set->header, data, hlen) != 0) {
    return aa_error_set(err, AA_EFORMAT, "%s: journal of another sweep (grid or columns differ)", path);
  }
  *valid_end = hlen;
  /* Row lines since the last trailer: [first, pos) when contiguous. */
  size_t npend = 0, first = hlen, pos = hlen;
  while (pos < len) {
    const char *ln = data + pos, *e = memchr(ln, '\n', len - pos);
    if (e == NULL) break; /* torn last line */
    size_t l = (size_t)(e - ln) + 1;
    if (l > 6 && memcmp(ln, "#done ", 6) == 0) {
      char hex[33] = {0}, crc[17] = {0};
      size_t index = 0, nrows = 0;
      aa_hash128_t id;
      char tail;
      char tmp[160];
      int ok = l < sizeof tmp;
      if (ok) {
        memcpy(tmp, ln, l);
        tmp[l] = '\0';
        ok = sscanf(tmp, "#done %zu %32s %zu %16s%c", &index, hex, &nrows, crc, &tail) == 5 && tail == '\n' &&
             strlen(hex) == 32 && strlen(crc) == 16 && parse_hex128(&id, hex) && index < set->ncells;
      }
      if (ok && nrows <= npend) {
        /* The rows are the nrows lines just before the trailer; count them back. */
        size_t start = pos, cnt = 0;
        while (cnt < nrows) {
          size_t s = start - 1;
          while (s > first && data[s - 1] != '\n')
            s--;
          start = s;
          cnt++;
        }
        aa_hash128_t h;
        aa_hash128_init(&h);
        aa_hash128_update(&h, data + start, pos - start);
        char want[17];
        snprintf(want, sizeof want, "%016llx", (unsigned long long)h.lo);
        ok = strcmp(want, crc) == 0;
        /* Every row line holds one field per column. */
        for (size_t p = start, r = 0; ok && r < nrows; r++) {
          size_t tabs = 0;
          while (data[p] != '\n')
            tabs += data[p++] == '\t';
          p++;
          ok = tabs + 1 == set->ncols;
        }
        if (ok) {
          if (!add_rec(set, index, id, nrows, data + start, pos - start))
            return aa_error_set(err, AA_ENOMEM, "%s: out of memory", path);
          *valid_end = pos + l;
        }
      }
      npend = 0;
      first = pos + l;
    } else if (ln[0] == '#') {
      npend = 0;
      first = pos + l;
    } else {
      npend++;
    }
    pos += l;
  }
  return AA_OK;
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int aa__journal_load_dir(aa_sweep_set_t *set, const char *dir, aa_error_t *err) {
  DIR *d = opendir(dir);
  if (d == NULL) return aa_error_set(err, errno == ENOENT ? AA_ENOTFOUND : AA_EIO, "%s: %s", dir, strerror(errno));
  char **names = NULL;
  size_t n = 0, cap = 0;
  int st = AA_OK;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t l = strlen(de->d_name);
    if (strncmp(de->d_name, "journal-", 8) != 0 || l < 12 || strcmp(de->d_name + l - 4, ".txt") != 0) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      char **nn = realloc(names, cap * sizeof *nn);
      if (nn == NULL) {
        st = AA_ENOMEM;
        break;
      }
      names = nn;
    }
    if ((names[n] = strdup(de->d_name)) == NULL) {
      st = AA_ENOMEM;
      break;
    }
    n++;
  }
  closedir(d);
  if (st == AA_OK && n > 1) qsort(names, n, sizeof *names, name_cmp);
  if (st != AA_OK) aa_error_set(err, st, "%s: out of memory", dir);
  for (size_t i = 0; st == AA_OK && i < n; i++) {
    char path[4096], *data;
    size_t len, vend;
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    st = aa_file_read(&data, &len, path, err);
    if (st == AA_OK) {
      st = aa__journal_parse(set, data, len, &vend, path, err);
      free(data);
    }
  }
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
  return st;
}

static int rec_cmp(const void *a, const void *b) {
  const aa_sweep_rec_t *x = a, *y = b;
  if (x->index != y->index) return x->index < y->index ? -1 : 1;
  return x->text < y->text ? -1 : x->text > y->text; /* any fixed tie order: duplicates are equal */
}

int aa__set_finish(aa_sweep_set_t *set, aa_error_t *err) {
  if (set->header == NULL) return aa_error_set(err, AA_ENOTFOUND, "sweep: no journal found");
  qsort(set->recs, set->nrecs, sizeof *set->recs, rec_cmp);
  size_t k = 0;
  for (size_t i = 0; i < set->nrecs; i++) {
    if (k > 0 && set->recs[k - 1].index == set->recs[i].index) {
      if (set->recs[k - 1].id.hi != set->recs[i].id.hi || set->recs[k - 1].id.lo != set->recs[i].id.lo)
        return aa_error_set(err, AA_EFORMAT, "sweep: cell %zu has two different ids", set->recs[i].index);
      free(set->recs[i].text);
      continue;
    }
    set->recs[k++] = set->recs[i];
  }
  set->nrecs = k;
  for (size_t i = 0; i < set->ncells; i++)
    if (i >= k || set->recs[i].index != i)
      return aa_error_set(err, AA_ENOTFOUND, "sweep: cell %zu is missing (%zu of %zu cells complete)", i, k,
                          set->ncells);
  return AA_OK;
}

/* Undo the journal's string escapes (\\ \t \n \r). */
static void unescape(aa_buf_t *b, const char *s, size_t n) {
  b->len = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '\\' && i + 1 < n) {
      char e = s[++i];
      c = e == 't' ? '\t' : e == 'n' ? '\n' : e == 'r' ? '\r' : e;
    }
    aa_buf_put(b, &c, 1);
  }
  aa_buf_put(b, "", 0);
}

/* A journal number as JSON: finite values as numbers (aa_json_num), the
   non-finite ones as the strings "nan", "inf", "-inf" (JSON has none, and a
   null would lose which). */
static json_t *json_number(const char *f, size_t n) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), f);
  double x = strtod(buf, NULL);
  return isfinite(x) ? aa_json_num(x) : json_string(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

/* The three texts of the results: every column in csv and json, the
   non-timing ones in canon. */
typedef struct {
  aa_buf_t csv, canon, json, tmp;
  aa_csv_t c_csv, c_canon;
} results_t;

/* One journal row line (tab-separated typed fields) into the three texts. */
static const char *results_row(results_t *o, const aa_sweep_set_t *set, const char *p, const char *end) {
  json_t *row = json_object();
  int bad = row == NULL;
  for (size_t c = 0; c < set->ncols; c++) {
    const char *f = p;
    while (p < end && *p != '\t' && *p != '\n')
      p++;
    size_t fl = (size_t)(p - f);
    p++; /* the tab or newline */
    int canon_col = set->colkind[c] != 't';
    const char *text = f + 1;
    size_t tl = fl > 0 ? fl - 1 : 0;
    json_t *v;
    if (fl > 0 && f[0] == 's') {
      unescape(&o->tmp, f + 1, fl - 1);
      text = aa_buf_str(&o->tmp);
      tl = o->tmp.len;
      v = aa_json_str(text);
    } else {
      v = fl > 0 ? json_number(text, tl) : json_null();
    }
    bad |= aa_json_set(row, set->colnames[c], v);
    aa_csv_field(&o->c_csv, text, tl);
    if (canon_col) aa_csv_field(&o->c_canon, text, tl);
  }
  aa_csv_end(&o->c_csv);
  aa_csv_end(&o->c_canon);
  char *line = bad ? NULL : aa_json_text(row, 1, NULL);
  json_decref(row);
  if (line == NULL)
    o->json.oom = 1;
  else
    aa_buf_puts(&o->json, line);
  free(line);
  return p;
}

int aa__write_results(const char *dir, const aa_sweep_set_t *set, aa_error_t *err) {
  results_t o = {0};
  aa_csv_init(&o.c_csv, &o.csv);
  aa_csv_init(&o.c_canon, &o.canon);
  for (size_t c = 0; c < set->ncols; c++) {
    aa_csv_str(&o.c_csv, set->colnames[c]);
    if (set->colkind[c] != 't') aa_csv_str(&o.c_canon, set->colnames[c]);
  }
  aa_csv_end(&o.c_csv);
  aa_csv_end(&o.c_canon);
  for (size_t r = 0; r < set->nrecs; r++)
    for (const char *p = set->recs[r].text, *end = p + set->recs[r].len; p < end;)
      p = results_row(&o, set, p, end);
  int st = AA_OK;
  if (o.csv.oom || o.canon.oom || o.json.oom || o.tmp.oom)
    st = aa_error_set(err, AA_ENOMEM, "sweep: out of memory for results");
  /* The three files are one set: out of space (or any write failure)
     leaves none of them new, not a results.csv beside an old jsonl. */
  const char *names[3] = {AA_SWEEP_RESULTS_CSV, AA_SWEEP_RESULTS_CANON, AA_SWEEP_RESULTS_JSONL};
  const aa_buf_t *bufs[3] = {&o.csv, &o.canon, &o.json};
  aa_fileset_t fs;
  aa_fileset_init(&fs);
  for (int i = 0; st == AA_OK && i < 3; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    st = aa_fileset_add(&fs, path, bufs[i]->buf, bufs[i]->len, err);
  }
  if (st == AA_OK)
    st = aa_fileset_commit(&fs, err);
  else
    aa_fileset_abort(&fs);
  aa_fileset_free(&fs);
  aa_buf_free(&o.csv);
  aa_buf_free(&o.canon);
  aa_buf_free(&o.json);
  aa_buf_free(&o.tmp);
  return st;
}

int aa_sweep_merge(size_t *ncells, const char *out_dir, const char *const *in_dirs, size_t n_in, aa_error_t *err) {
  aa_sweep_set_t set = {0};
  int st = AA_OK;
  for (size_t i = 0; st == AA_OK && i < n_in; i++)
    st = aa__journal_load_dir(&set, in_dirs[i], err);
  if (st == AA_OK) st = aa__set_finish(&set, err);
  int dirfd = -1;
  if (st == AA_OK) st = aa_mkdir_p(out_dir, err);
  if (st == AA_OK) st = aa_sweep_lock(&dirfd, out_dir, err); /* a run starting there keeps our temporaries */
  if (st == AA_OK) st = aa__write_results(out_dir, &set, err);
  aa_sweep_unlock(dirfd);
  if (st == AA_OK && ncells != NULL) *ncells = set.ncells;
  aa__set_free(&set);
  return st;
}
