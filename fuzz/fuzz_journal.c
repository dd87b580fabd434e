/* attnacc: libFuzzer harness of the sweep journal reader: any bytes give records or an error, the valid prefix
 * lies inside the input, and parsing that prefix again gives the same records. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "fuzz.h"
#include "sweep/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  aa_sweep_set_t a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  aa_error_t err;
  size_t end = 0, end2 = 0;
  if (aa__journal_parse(&a, (const char *)data, size, &end, "fuzz-journal.txt", &err) == AA_OK) {
    AA_FUZZ_CHECK(end <= size, "valid_end past the input");
    /* what a resume keeps (the valid prefix) reads back to the same records (sweep.h's journal protocol) */
    AA_FUZZ_CHECK(aa__journal_parse(&b, (const char *)data, end, &end2, "fuzz-prefix.txt", &err) == AA_OK,
                  "the valid prefix of a journal does not parse");
    AA_FUZZ_CHECK(end2 == end && b.nrecs == a.nrecs, "the valid prefix parses to other records");
    for (size_t i = 0; i < a.nrecs; i++)
      AA_FUZZ_CHECK(a.recs[i].index == b.recs[i].index && a.recs[i].len == b.recs[i].len &&
                        memcmp(a.recs[i].text, b.recs[i].text, a.recs[i].len) == 0,
                    "a record of the valid prefix differs");
  }
  aa__set_free(&a);
  aa__set_free(&b);
  return 0;
}
