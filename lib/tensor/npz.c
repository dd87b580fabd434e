/* attnacc: one array of a NumPy .npz archive (np.savez, np.savez_compressed), read with libzip. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "npy.h"

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

int aa_npz_read(aa_ndarray_t *out, const char *path, const char *name, unsigned flags, aa_error_t *err) {
  int zerr = 0, rc;
  zip_t *za;
  zip_int64_t idx;
  zip_stat_t st;
  zip_file_t *zf;
  unsigned char *buf = NULL;
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
  idx = zip_name_locate(za, member, 0);
  if (idx < 0) {
    char list[300];
    member_list(list, sizeof list, za);
    zip_close(za);
    return aa_error_set(err, AA_ENOTFOUND, "%s: no array '%s' (members: %s)", path, name, list[0] ? list : "none");
  }
  if (zip_stat_index(za, (zip_uint64_t)idx, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
    zip_close(za);
    return aa_error_set(err, AA_EFORMAT, "%s: cannot read the size of the member", label);
  }
  /* Grow the buffer with the data that actually arrives: the size in the
     archive's directory is a claim (a 300-byte file can declare 4 GiB), so
     memory follows what decompresses, and the two must agree at the end. */
  zf = zip_fopen_index(za, (zip_uint64_t)idx, 0);
  if (zf == NULL) {
    rc = aa_error_set(err, AA_EFORMAT, "%s: cannot decompress: %s", label, zip_strerror(za));
    zip_close(za);
    return rc;
  }
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      size_t want = cap ? 2 * cap : (size_t)1 << 16;
      if (want > (size_t)st.size + 1)
        want = (size_t)st.size + 1; /* one byte past the claim detects a longer member */
      unsigned char *nb = want > cap ? realloc(buf, want) : NULL;
      if (nb == NULL) {
        rc = want > cap ? aa_error_set(err, AA_ENOMEM, "%s: cannot allocate %zu bytes", label, want)
                        : aa_error_set(err, AA_EFORMAT, "%s: the member is longer than the archive says (%llu bytes)",
                                       label, (unsigned long long)st.size);
        goto fail;
      }
      buf = nb;
      cap = want;
    }
    zip_int64_t got = zip_fread(zf, buf + len, cap - len);
    if (got < 0) {
      rc = aa_error_set(err, AA_EFORMAT, "%s: cannot decompress: %s", label, zip_file_strerror(zf));
      goto fail;
    }
    if (got == 0) break;
    len += (size_t)got;
  }
  if (len != (size_t)st.size) {
    rc = aa_error_set(err, AA_EFORMAT, "%s: the member has %zu bytes, the archive says %llu", label, len,
                      (unsigned long long)st.size);
    goto fail;
  }
  zip_fclose(zf);
  zip_close(za);
  rc = aa_npy_parse_nd(out, buf, len, label, flags, err);
  free(buf);
  return rc;
fail:
  zip_fclose(zf);
  free(buf);
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
