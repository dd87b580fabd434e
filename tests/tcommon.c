/* attnacc: tests of the common module's name lookup and whole-string integer parsing. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include "common.h"
#include "tests.h"

int main(void) {
  static const char *const names[3] = {"asc", "desc", "tree"};
  AA_CHECK(aa_name_index("asc", names, 3) == 0 && aa_name_index("tree", names, 3) == 2, "names found at their index");
  AA_CHECK(aa_name_index("Tree", names, 3) == -1 && aa_name_index("", names, 3) == -1, "lookup is exact");
  AA_CHECK(aa_name_index(NULL, names, 3) == -1 && aa_name_index("asc", names, 0) == -1, "NULL name, empty table");

  uint64_t u = 7;
  AA_CHECK(aa_parse_u64(&u, "18446744073709551615") && u == UINT64_MAX, "2^64 - 1 parses");
  AA_CHECK(aa_parse_u64(&u, "0x10") && u == 16 && aa_parse_u64(&u, "010") && u == 8, "hex and octal as base 0");
  u = 7;
  AA_CHECK(!aa_parse_u64(&u, "18446744073709551616") && u == 7, "2^64 refused, output untouched");
  AA_CHECK(!aa_parse_u64(&u, "-1") && !aa_parse_u64(&u, "") && !aa_parse_u64(&u, "12x") && u == 7,
           "minus, empty and trailing text refused");
  long l = 3;
  AA_CHECK(aa_parse_long(&l, "-200") && l == -200, "negative long parses");
  AA_CHECK(!aa_parse_long(&l, "9223372036854775808") && !aa_parse_long(&l, "1.5") && l == -200,
           "overflow and fractions refused");
  return aa_test_finish("tcommon");
}
