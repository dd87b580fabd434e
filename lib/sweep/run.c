/* attnacc: the sweep engine: resume from the journals, run a shard's cells on worker threads, append each cell
 * atomically. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

void aa_sweep_opts_init(aa_sweep_opts_t *opts) {
  *opts = (aa_sweep_opts_t){.threads = 1, .shard_count = 1, .sync = 1};
}

typedef struct {
  const aa_sweep_t *sw;
  aa_sweep_eval_fn eval;
  void *ctx;
  const aa_sweep_opts_t *opts;
  int fd;
  const char *path; /* the journal, for messages */
  const size_t *todo;
  size_t ntodo, next;
  unsigned char *have; /* per cell: complete in the folder */
  aa_sweep_progress_t prog;
  pthread_mutex_t lock;
  int status;
  aa_error_t err;
} aa_run_t;

/* "n=1024 mask=causal ..." for messages. */
static void cell_desc(char *out, size_t size, const aa_cell_t *c) {
  size_t k = 0;
  out[0] = '\0';
  for (size_t a = 0; a < c->ncoords && k + 1 < size; a++) {
    char num[40];
    const aa_val_t *v = &c->vals[a];
    if (v->kind == AA_VAL_INT)
      snprintf(num, sizeof num, "%lld", (long long)v->i);
    else if (v->kind == AA_VAL_DOUBLE)
      aa__fmt_double(num, v->d);
    int n = snprintf(out + k, size - k, "%s%s=%s", a ? " " : "", c->names[a], v->kind == AA_VAL_STR ? v->s : num);
    if (n < 0) break;
    k += (size_t)n;
  }
}

static void set_error(aa_run_t *run, int st, const char *fmt, const char *a, const char *b) {
  if (run->status == AA_OK) {
    run->status = st;
    aa_error_set(&run->err, st, fmt, a, b);
  }
}

static void *worker(void *arg) {
  aa_run_t *run = arg;
  aa_sweep_rows_t rows;
  aa_buf_t buf = {0};
  aa__rows_init(&rows, run->sw);
  for (;;) {
    pthread_mutex_lock(&run->lock);
    int stop = run->status != AA_OK || run->next >= run->ntodo;
    size_t i = stop ? 0 : run->todo[run->next++];
    pthread_mutex_unlock(&run->lock);
    if (stop) break;
    const aa_cell_t *cell = &run->sw->cells[i];
    aa__rows_reset(&rows, cell);
    int st = run->eval(cell, &rows, run->ctx);
    if (st == AA_OK) st = rows.status;
    buf.len = 0;
    if (st == AA_OK) {
      aa__journal_record(&buf, &rows);
      if (buf.oom) {
        st = AA_ENOMEM;
        aa_error_set(&rows.err, st, "out of memory for the record");
      }
    }
    pthread_mutex_lock(&run->lock);
    if (st != AA_OK) {
      char desc[400], head[480];
      cell_desc(desc, sizeof desc, cell);
      snprintf(head, sizeof head, "sweep: cell %zu (%s)", cell->index, desc);
      set_error(run, st, "%s: %s", head, rows.err.msg[0] ? rows.err.msg : aa_status_str(st));
    } else if (run->status == AA_OK) {
      /* One write() of the whole record to the O_APPEND journal: the cell is
         complete exactly when its trailer line is on disk (see sweep.h). */
      struct stat jst;
      off_t before = fstat(run->fd, &jst) == 0 ? jst.st_size : -1;
      size_t off = 0;
      int e = 0;
      while (off < buf.len) { /* only a short write (out of space) leads to a second one */
        ssize_t w = write(run->fd, buf.buf + off, buf.len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          e = w < 0 ? errno : EIO;
          break;
        }
        off += (size_t)w;
      }
      if (e == 0 && run->opts->sync && fsync(run->fd) != 0) e = errno;
      if (e != 0) {
        if (before >= 0 && ftruncate(run->fd, before) != 0) {
          /* the partial record stays: readers skip it and resume cuts it */
        }
        set_error(run, AA_EIO, "sweep: %s: cannot append a finished cell: %s", run->path, strerror(e));
      } else {
        run->have[i] = 1;
        run->prog.done++;
        if (run->opts->progress != NULL) run->opts->progress(&run->prog, run->opts->progress_ctx);
      }
    }
    pthread_mutex_unlock(&run->lock);
  }
  aa__rows_free(&rows);
  aa_buf_free(&buf);
  return NULL;
}

/* A journal that is a symbolic link is refused: appending through it
   would write into whatever file it names. */
static int link_refused(const char *path, aa_error_t *err) {
  return aa_error_set(err, AA_EINVAL, "%s: is a symbolic link; a sweep journal must be a regular file (not followed)",
                      path);
}
static int refuse_link(const char *path, aa_error_t *err) {
  struct stat st;
  return lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? link_refused(path, err) : AA_OK;
}

/* Open and lock this shard's journal: created when create is set; without
   it a missing journal is no error (*fd_out stays -1). */
static int lock_journal(int *fd_out, const char *path, int create, aa_error_t *err) {
  /* O_NOFOLLOW: a link made after refuse_link looked is refused too (ELOOP) */
  int fd = open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0666);
  if (fd < 0 && errno == ENOENT && !create) return AA_OK;
  if (fd < 0 && errno == ELOOP) return link_refused(path, err);
  if (fd < 0) return aa_error_set(err, AA_EIO, "%s: %s", path, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    /* the caller's choice of folder: bad input, not a failure of the run */
    return aa_error_set(err, AA_EINVAL, "%s: in use by another sweep run (the folder is busy)", path);
  }
  *fd_out = fd;
  return AA_OK;
}

/* The folder's provenance (meta.json), written once the run's cells succeeded. */
static int write_meta(const char *dir, const aa_sweep_t *sw, const aa_sweep_meta_t *meta, aa_error_t *err) {
  aa_fileset_t fs;
  int st;
  aa_fileset_init(&fs);
  st = aa_sweep_meta_stage(&fs, dir, sw, meta, err);
  if (st == AA_OK)
    st = aa_fileset_commit(&fs, err);
  else
    aa_fileset_abort(&fs);
  aa_fileset_free(&fs);
  return st;
}

/* Cut a torn tail off the locked journal fd and write the header into a
   new or empty one (the caller closes fd, whatever happens). */
static int prepare_journal(int fd, size_t *cut_bytes, size_t *cut_lines, const aa_sweep_t *sw, const char *path,
                           aa_error_t *err) {
  char *data;
  size_t len, vend;
  aa_sweep_set_t own = {0};
  int st = aa_file_read(&data, &len, path, err);
  if (st == AA_OK) {
    if (!aa__parse_header(&own, sw->header, strlen(sw->header)))
      st = aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
    else
      st = aa__journal_parse(&own, data, len, &vend, path, err);
    if (st == AA_OK && vend < len) {
      *cut_bytes = len - vend;
      *cut_lines = data[len - 1] != '\n';
      for (size_t i = vend; i < len; i++)
        *cut_lines += data[i] == '\n';
    }
    free(data);
  }
  aa__set_free(&own);
  if (st == AA_OK && vend < len && ftruncate(fd, (off_t)vend) != 0)
    st = aa_error_set(err, AA_EIO, "%s: cannot truncate the torn tail: %s", path, strerror(errno));
  if (st == AA_OK && vend == 0) {
    size_t hl = strlen(sw->header);
    if (write(fd, sw->header, hl) != (ssize_t)hl || fsync(fd) != 0)
      st = aa_error_set(err, AA_EIO, "%s: cannot write the header: %s", path, strerror(errno));
  }
  return st;
}

/* Mark the cells complete in any journal of the folder (run->have) and list
   this shard's others, up to max_cells, in todo. Read before this shard's
   journal is created, so that a run refused for the folder's contents
   (another grid, finished cells without resume) creates nothing. */
static int plan_cells(aa_run_t *run, size_t *todo, size_t ish, size_t nsh, aa_error_t *err) {
  const aa_sweep_t *sw = run->sw;
  const aa_sweep_opts_t *opts = run->opts;
  aa_sweep_set_t set = {0};
  int st;
  if (!aa__parse_header(&set, sw->header, strlen(sw->header)))
    return aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
  st = aa__journal_load_dir(&set, opts->out_dir, err);
  for (size_t r = 0; st == AA_OK && r < set.nrecs; r++) {
    const aa_cell_t *c = &sw->cells[set.recs[r].index];
    if (c->id.hi == set.recs[r].id.hi && c->id.lo == set.recs[r].id.lo) run->have[c->index] = 1;
  }
  aa__set_free(&set);
  if (st != AA_OK) return st;
  for (size_t i = ish; i < sw->ncells; i += nsh) {
    run->prog.total++;
    if (run->have[i])
      run->prog.skipped++;
    else if (opts->max_cells == 0 || run->ntodo < opts->max_cells)
      todo[run->ntodo++] = i;
  }
  /* Without resume, finished cells of this shard mean a second run into a
     used folder: refuse rather than mix two sweeps' timings silently. */
  if (run->prog.skipped > 0 && !opts->resume)
    return aa_error_set(err, AA_EINVAL, "%s: holds %zu finished cells of this shard; resume, or use a new folder",
                        opts->out_dir, run->prog.skipped);
  return AA_OK;
}

/* Run the todo list on `threads` workers (the calling thread is worker 0). */
static int run_workers(aa_run_t *run, int threads, aa_error_t *err) {
  pthread_t tid[1024];
  int started = 0;
  pthread_mutex_init(&run->lock, NULL);
  if (threads > 1 && (size_t)threads > run->ntodo) threads = run->ntodo > 0 ? (int)run->ntodo : 1;
  for (int t = 1; t < threads; t++) {
    if (pthread_create(&tid[t], NULL, worker, run) != 0) break;
    started++;
  }
  worker(run);
  for (int t = 1; t <= started; t++)
    pthread_join(tid[t], NULL);
  pthread_mutex_destroy(&run->lock);
  if (run->status != AA_OK && err != NULL) *err = run->err;
  return run->status;
}

/* Write the results files once the folder holds the whole grid. */
static int finish_results(aa_run_t *run, aa_error_t *err) {
  const aa_sweep_t *sw = run->sw;
  aa_sweep_set_t set = {0};
  size_t nall = 0;
  int st;
  for (size_t i = 0; i < sw->ncells; i++)
    nall += run->have[i];
  if (nall < sw->ncells) return AA_OK;
  if (!aa__parse_header(&set, sw->header, strlen(sw->header)))
    return aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
  st = aa__journal_load_dir(&set, run->opts->out_dir, err);
  if (st == AA_OK) st = aa__set_finish(&set, err);
  if (st == AA_OK) st = aa__write_results(run->opts->out_dir, &set, err);
  if (st == AA_OK) run->prog.complete = 1;
  aa__set_free(&set);
  return st;
}

int aa_sweep_run(aa_sweep_progress_t *stats, const aa_sweep_t *sw, aa_sweep_eval_fn eval, void *ctx,
                 const aa_sweep_opts_t *opts, aa_error_t *err) {
  if (stats != NULL) *stats = (aa_sweep_progress_t){0};
  if (sw == NULL || !sw->built) return aa_error_set(err, AA_EINVAL, "sweep: not built (call aa_sweep_build)");
  if (eval == NULL || opts == NULL || opts->out_dir == NULL || opts->out_dir[0] == '\0')
    return aa_error_set(err, AA_EINVAL, "sweep: eval and opts->out_dir are required");
  size_t nsh = opts->shard_count > 1 ? opts->shard_count : 1, ish = opts->shard_index;
  if (ish >= nsh) return aa_error_set(err, AA_EINVAL, "sweep: shard %zu of %zu does not exist", ish, nsh);
  int threads = opts->threads > 0 ? opts->threads : 1;
  if (threads > 1024) return aa_error_set(err, AA_EINVAL, "sweep: %d threads is too many", threads);
  int st = aa_mkdir_p(opts->out_dir, err), dirfd = -1, fd = -1;
  if (st == AA_OK) st = aa_sweep_lock(&dirfd, opts->out_dir, err);
  if (st) return st;

  char path[4096];
  aa_sweep_journal_path(path, sizeof path, opts->out_dir, ish, nsh);
  size_t cut_bytes = 0, cut_lines = 0;
  aa_run_t run = {.sw = sw, .eval = eval, .ctx = ctx, .opts = opts, .path = path};
  size_t *todo = calloc(sw->ncells + 1, sizeof *todo);
  run.have = calloc(sw->ncells + 1, 1);
  if (run.have == NULL || todo == NULL) {
    st = aa_error_set(err, AA_ENOMEM, "sweep: out of memory");
    goto done;
  }
  /* A journal of this shard that exists is locked first, so that a busy
     folder says so before anything else. */
  if ((st = refuse_link(path, err)) != AA_OK || (st = lock_journal(&fd, path, 0, err)) != AA_OK ||
      (st = plan_cells(&run, todo, ish, nsh, err)) != AA_OK)
    goto done;
  if ((fd < 0 && (st = lock_journal(&fd, path, 1, err)) != AA_OK) ||
      (st = prepare_journal(fd, &cut_bytes, &cut_lines, sw, path, err)) != AA_OK) {
    run.prog = (aa_sweep_progress_t){0};
    goto done;
  }
  run.fd = fd;
  run.prog.discarded_bytes = cut_bytes;
  run.prog.discarded_lines = cut_lines;
  run.prog.todo = run.ntodo;
  run.todo = todo;
  if (opts->progress != NULL) opts->progress(&run.prog, opts->progress_ctx);
  if ((st = run_workers(&run, threads, err)) == AA_OK && (st = finish_results(&run, err)) == AA_OK &&
      opts->meta != NULL)
    st = write_meta(opts->out_dir, sw, opts->meta, err);
done:
  if (stats != NULL) *stats = run.prog;
  free(run.have);
  free(todo);
  if (fd >= 0) close(fd);
  aa_sweep_unlock(dirfd);
  return st;
}
