/* attnacc: one array of a NumPy .npz archive (np.savez, np.savez_compressed), read with libzip. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "internal.h"

#ifdef AA_HAVE_LIBZIP
#include <zip.h>

/* The member names, ", "-separated, into buf (for "no such array" messages). */
static void member_list(char *buf, size_t cap, zip_t *za) {
  zip_int64_t n = zip_get_num_entries(za, 0);
  size_t used = 0;
  buf[0] = '\0';
  for (zip_int64_t i = 0; i < n && used + 1 < cap; i++) {
    const char *nm = zip_get_name(za, (zip_uint64_t)i, 0);
    if (nm != NULL) used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", nm);
  }
}

/* Deflate emits at least about one bit per 258-byte match (RFC 1951), so no
   deflated member inflates to more than about 1032 times its compressed
   size (zlib's own figure for its maximum ratio). */
#define NPZ_DEFLATE_MAX_RATIO 1032u

/* A name that two members share: NumPy's np.load reads the last of them
   and libzip the first, so the archive has no one meaning. NULL when none. */
static const char *duplicate_member(zip_t *za) {
  zip_int64_t n = zip_get_num_entries(za, 0);
  for (zip_int64_t i = 0; i < n; i++) {
    const char *nm = zip_get_name(za, (zip_uint64_t)i, 0);
    if (nm != NULL && zip_name_locate(za, nm, 0) != i) return nm;
  }
  return NULL;
}

/* The member as an .npy source: inflated as it is read, so memory follows
   the shape its header declares (checked first) and never the claim of the
   archive's directory. */
typedef struct {
  zip_file_t *zf;
  int failed;
} zip_src_t;

static size_t zip_read(void *ctx, void *buf, size_t n) {
  zip_src_t *z = ctx;
  size_t got = 0;
  while (got < n && !z->failed) {
    zip_int64_t k = zip_fread(z->zf, (unsigned char *)buf + got, n - got);
    if (k < 0) z->failed = 1;
    if (k <= 0) break;
    got += (size_t)k;
  }
  return got;
}

/* The member's directory entry against what its method can give: stored
   members hold their size, deflated ones at most NPZ_DEFLATE_MAX_RATIO times
   it; np.savez and np.savez_compressed write nothing else. */
static int member_bounds(const zip_stat_t *st, const char *label, aa_error_t *err) {
  if (!(st->valid & ZIP_STAT_SIZE) || !(st->valid & ZIP_STAT_COMP_SIZE) || !(st->valid & ZIP_STAT_COMP_METHOD))
    return aa_error_set(err, AA_EFORMAT, "%s: cannot read the size of the member", label);
  if (st->comp_method == ZIP_CM_STORE && st->size != st->comp_size)
    return aa_error_set(err, AA_EFORMAT, "%s: a stored member of %llu bytes claims %llu", label,
                        (unsigned long long)st->comp_size, (unsigned long long)st->size);
  if (st->comp_method == ZIP_CM_DEFLATE && st->size / NPZ_DEFLATE_MAX_RATIO > st->comp_size)
    return aa_error_set(
        err, AA_EFORMAT, "%s: the archive claims %llu bytes from %llu compressed, more than deflate's %u:1 can give",
        label, (unsigned long long)st->size, (unsigned long long)st->comp_size, NPZ_DEFLATE_MAX_RATIO);
  if (st->comp_method != ZIP_CM_STORE && st->comp_method != ZIP_CM_DEFLATE)
    return aa_error_set(err, AA_EFORMAT, "%s: compression method %d (np.savez writes stored or deflated members)",
                        label, (int)st->comp_method);
  return AA_OK;
}

int aa_npz_read(aa_ndarray_t *out, const char *path, const char *name, unsigned flags, aa_error_t *err) {
  int zerr = 0, rc;
  zip_t *za;
  zip_int64_t idx;
  zip_stat_t st;
  zip_src_t z = {NULL, 0};
  const char *dup;
  char member[256], label[600];
  *out = (aa_ndarray_t){0};
  za = zip_open(path, ZIP_RDONLY, &zerr);
  if (za == NULL) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, zerr);
    rc = zerr == ZIP_ER_OPEN || zerr == ZIP_ER_READ || zerr == ZIP_ER_NOENT
             ? aa_error_set(err, AA_EIO, "%s: cannot open: %s", path, zip_error_strerror(&ze))
             : aa_error_set(err, AA_EFORMAT, "%s: not an .npz (zip) archive: %s", path, zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return rc;
  }
  snprintf(member, sizeof member, "%s.npy", name);
  snprintf(label, sizeof label, "%s[%s]", path, member);
  if ((dup = duplicate_member(za)) != NULL) {
    rc = aa_error_set(err, AA_EFORMAT, "%s: duplicate member '%s' (NumPy would read the last, libzip the first)",
                      path, dup);
    zip_close(za);
    return rc;
  }
  idx = zip_name_locate(za, member, 0);
  if (idx < 0) {
    char list[300];
    member_list(list, sizeof list, za);
    zip_close(za);
    return aa_error_set(err, AA_ENOTFOUND, "%s: no array '%s' (members: %s)", path, name, list[0] ? list : "none");
  }
  if (zip_stat_index(za, (zip_uint64_t)idx, 0, &st) != 0) {
    zip_close(za);
    return aa_error_set(err, AA_EFORMAT, "%s: cannot read the size of the member", label);
  }
  if ((rc = member_bounds(&st, label, err)) != AA_OK) {
    zip_close(za);
    return rc;
  }
  if ((z.zf = zip_fopen_index(za, (zip_uint64_t)idx, 0)) == NULL) {
    rc = aa_error_set(err, AA_EFORMAT, "%s: cannot decompress: %s", label, zip_strerror(za));
    zip_close(za);
    return rc;
  }
  rc = aa__npy_read_src(out, &(aa__src_t){zip_read, &z, st.size}, label, AA_NDARRAY_MAX_DIM, flags, err);
  if (z.failed) { /* a short read was libzip's error (a CRC or length mismatch): say that */
    aa_ndarray_free(out);
    rc = aa_error_set(err, AA_EFORMAT, "%s: cannot decompress: %s", label, zip_file_strerror(z.zf));
  }
  zip_fclose(z.zf);
  zip_close(za);
  return rc;
}

#else

int aa_npz_read(aa_ndarray_t *out, const char *path, const char *name, unsigned flags, aa_error_t *err) {
  (void)name;
  (void)flags;
  *out = (aa_ndarray_t){0};
  return aa_error_set(
      err, AA_EUNSUPPORTED,
      "%s: .npz archives need libzip: install it (apt-get install libzip-dev) and run configure again", path);
}

#endif
