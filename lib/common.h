/* attnacc: status codes, error details, and the file and text utilities shared by every module. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_COMMON_H
#define AA_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every library function that can fail returns one of these (0 = success).
   The library never prints and never exits; the front end turns a status
   plus the optional aa_error_t text into a message. */
typedef enum {
  AA_OK = 0,
  AA_EINVAL = 1,       /* an argument or option value is invalid */
  AA_ENOMEM = 2,       /* allocation failed or the size is impossible */
  AA_EIO = 3,          /* a file could not be opened, read or written */
  AA_EFORMAT = 4,      /* a file is malformed or of an unsupported kind */
  AA_ESHAPE = 5,       /* tensor shapes are wrong or do not match */
  AA_ENAN = 6,         /* an input holds NaN or Inf where none is allowed */
  AA_EUNSUPPORTED = 7, /* a valid request this build or recipe cannot do */
  AA_ERANGE = 8,       /* a value is outside the range a mechanism admits */
  AA_ENOTFOUND = 9     /* a named thing (recipe, model, file) does not exist */
} aa_status_t;

/* Optional detail for a failed call: a one-line message naming the problem
   (file, line, key, shape). Functions take it as their last argument; NULL
   is always allowed. */
typedef struct {
  char msg[512];
} aa_error_t;

/* Short English name of a status ("invalid argument", ...). */
const char *aa_status_str(int status);

/* Fill err (if non-NULL) with a printf-style message and return status.
   The message is passed through aa_escape, so that bytes quoted from a
   file (a key, a token, a header) reach a terminal as text, never as
   control sequences or a line break. */
int aa_error_set(aa_error_t *err, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Put "prefix: " in front of err's message (truncating its end if needed),
   unless it already starts so: a module's own messages may name it
   ("oracle: ..."), and one name is enough. err may be NULL. */
void aa_error_prefix(aa_error_t *err, const char *prefix);

/* The printable form of text (up to its NUL) into dst (cap bytes, cap >= 1,
   always NUL-terminated): \n, \r, \t for those three, \xNN for every other
   byte outside ' '..'~' (control bytes, DEL, and bytes >= 0x80, which a
   terminal may read as C1 controls). A backslash stays as it is, so text
   that is already printable is unchanged and escaping twice is escaping
   once. Truncation never splits an escape. Returns dst. */
char *aa_escape(char *dst, size_t cap, const char *text);

/* Overflow-checked size product: returns 0 and sets *out, or AA_ENOMEM. */
int aa_size_mul(size_t *out, size_t a, size_t b);

/* Position of name among names[0..n-1], or -1 (name NULL: -1): the
   name <-> enum tables of the modules. */
int aa_name_index(const char *name, const char *const *names, int n);
/* The whole text as an integer (decimal, 0x hex or 0 octal, as strtoull /
   strtol with base 0): 1 and *out set, or 0 (empty, trailing text, out of
   range; aa_parse_u64 also refuses a minus sign). */
int aa_parse_u64(uint64_t *out, const char *text);
int aa_parse_long(long *out, const char *text);

/* ---- a growable buffer (bytes or text) ---- */

/* Zero-initialise ({0}) before use. After any append buf holds len bytes
   followed by a NUL (buf is NULL only while nothing was ever appended).
   The first failed allocation sets oom and turns later appends into no-ops,
   so a caller builds a whole text and checks oom once at the end. */
typedef struct {
  char *buf;
  size_t len, cap;
  int oom;
} aa_buf_t;
void aa_buf_put(aa_buf_t *b, const void *data, size_t n);
void aa_buf_puts(aa_buf_t *b, const char *s);
void aa_buf_printf(aa_buf_t *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const char *aa_buf_str(const aa_buf_t *b); /* the text, "" while empty */
void aa_buf_free(aa_buf_t *b);             /* and zeroed again */

/* ---- CSV (RFC 4180) ---- */

/* Records appended to a buffer. A field is quoted when it holds a comma, a
   double quote, CR or LF (RFC 4180 section 2, rules 5-7: quotes inside are
   doubled), and also when it starts or ends with a space, which some
   readers trim although RFC 4180 keeps it. Records end in LF, not the CRLF
   of RFC 4180 rule 1: every reader of the project, gnuplot and Python's csv
   module accept it, and the result files stay diff-friendly. */
typedef struct {
  aa_buf_t *out;
  size_t nfield; /* fields so far in the current record */
} aa_csv_t;
void aa_csv_init(aa_csv_t *c, aa_buf_t *out);
void aa_csv_field(aa_csv_t *c, const char *s, size_t n); /* n bytes of s (NUL bytes are not allowed in CSV) */
void aa_csv_str(aa_csv_t *c, const char *s);             /* a C string; NULL is an empty field */
void aa_csv_printf(aa_csv_t *c, const char *fmt, ...)    /* one field, formatted */
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void aa_csv_end(aa_csv_t *c); /* end the record */

/* ---- files ---- */

/* mkdir -p: create dir and its missing parents (mode 0777 less the umask).
   AA_OK when dir already is a folder; AA_EIO with a message naming the
   part that is a file or could not be created; AA_EINVAL for "". */
int aa_mkdir_p(const char *dir, aa_error_t *err);

/* Read the whole file into *data (malloc'd, NUL-terminated) and *len.
   AA_ENOTFOUND when it does not exist, AA_EIO, AA_ENOMEM. */
int aa_file_read(char **data, size_t *len, const char *path, aa_error_t *err);

/* An output file that appears whole or not at all. aa_ofile_open creates a
   temporary beside path (same folder, hence same file system, so the final
   rename is atomic), named path.tmp.<pid>.<n> with n from a process-wide
   atomic counter and created O_EXCL: no two threads or processes ever share
   a temporary, and concurrent writers of one path each rename a whole file
   (the last one wins). The caller writes to f, then aa_ofile_commit
   flushes, fsyncs, closes and renames; on any failure (a write error on f
   included, seen through ferror) commit removes the temporary and returns
   AA_EIO with "PATH: cannot write: REASON" naming path, never the
   temporary. aa_ofile_abort removes the temporary. A path that is an
   existing character device or FIFO (/dev/stdout, /dev/null, a pipe) is
   written in place: renaming over it would replace the node. */
typedef struct {
  FILE *f;
  char *path; /* the final name (copied) */
  char *tmp;  /* the temporary's name; NULL when written in place */
} aa_ofile_t;
int aa_ofile_open(aa_ofile_t *o, const char *path, aa_error_t *err);
int aa_ofile_commit(aa_ofile_t *o, aa_error_t *err);
void aa_ofile_abort(aa_ofile_t *o);
/* Only the first half of commit (flush, fsync, close: the data are on disk
   under o->tmp), for files renamed together (aa_fileset_t); then
   aa_ofile_rename, or aa_ofile_abort to remove the temporary. */
int aa_ofile_finish(aa_ofile_t *o, aa_error_t *err);
int aa_ofile_rename(aa_ofile_t *o, aa_error_t *err);

/* The whole of data[0..len) into path through an aa_ofile_t. */
int aa_file_write(const char *path, const void *data, size_t len, aa_error_t *err);

/* A set of files that appear together: each is written to its temporary
   first (aa_fileset_add, or aa_ofile_open, writes to f, aa_fileset_take
   for a stream), and aa_fileset_commit renames them all once all are on disk, so
   out of space or a failed write leaves none of them. aa_fileset_abort
   removes the temporaries and the folders aa_fileset_mkdir_p created (when
   empty). A rename failing in the middle of commit (renames need no data
   blocks, so not for lack of space) can still leave part of the set; commit
   then removes what it had not renamed. */
typedef struct {
  aa_ofile_t *files; /* finished, not yet renamed */
  size_t n, cap;
  char **made; /* folders created by aa_fileset_mkdir_p, parents first */
  size_t nmade, capmade;
} aa_fileset_t;
void aa_fileset_init(aa_fileset_t *s);
int aa_fileset_mkdir_p(aa_fileset_t *s, const char *dir, aa_error_t *err);
int aa_fileset_add(aa_fileset_t *s, const char *path, const void *data, size_t len, aa_error_t *err);
/* Finish o (opened with aa_ofile_open and written) into the set; on
   failure its temporary is removed. Either way o is the set's now. */
int aa_fileset_take(aa_fileset_t *s, aa_ofile_t *o, aa_error_t *err);
int aa_fileset_commit(aa_fileset_t *s, aa_error_t *err);
void aa_fileset_abort(aa_fileset_t *s);
void aa_fileset_free(aa_fileset_t *s); /* after commit or abort */

/* Which GPU a thread's GPU work runs on, where a machine has several. A
   process is one of local_size ranks on its node (the MPI launcher's
   OMPI_COMM_WORLD_LOCAL_RANK / _SIZE, MPI_LOCALRANKID / MPI_LOCALNRANKS, or
   SLURM_LOCALID / SLURM_NTASKS_PER_NODE; else rank 0 of 1), and a thread
   may claim a slot (a sweep's worker its own; -1, the default, is slot 0).
   The device of (local_rank, slot) among ndev is
   (local_rank + slot * local_size) mod ndev: ranks first, so that 8 ranks
   on 8 GPUs take one each, and 1 rank with 8 workers spreads them the
   same way. Every GPU entry point of the library selects this device for
   the calling thread before it works (CUDA_VISIBLE_DEVICES narrows the
   list, as for any CUDA program). Values never depend on the device. */
int aa_gpu_pick(int ndev, int local_rank, int local_size, int slot); /* 0 when ndev < 1 */
void aa_gpu_thread_slot(int slot);                                   /* this thread's slot (-1: none) */
int aa_gpu_index(int ndev); /* the device for this thread: aa_gpu_pick with the node rank and the slot */

/* Seconds of a monotonic clock (differences only). */
double aa_wall_seconds(void);
/* Where a call's time goes, when the environment variable env is set (AA_SCORE_TIMES, AA_ORACLE_CUDA_TIMES): the
   seconds since *t as a line "prefix: what  S s" on stderr (none while *t is 0 or what is empty), then *t = now.
   Does nothing when env is unset: results never depend on it. */
void aa_phase_mark(const char *env, const char *prefix, const char *what, double *t);

#ifdef __cplusplus
}
#endif
#endif
