/* attnacc: the subcommands of the attnacc program and their table (one line per command in attnacc.c). */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef AA_COMMANDS_H
#define AA_COMMANDS_H

#include <stddef.h>

/* Each command gets argv[0] = its own name and its options after it, and
   returns the process exit status (0 ok, 2 bad usage or input, 1 failure). */
typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary; /* one line for `attnacc --help` and `attnacc list` */
} aa_command_t;

extern const aa_command_t aa_commands[];
extern const size_t aa_command_count;

int aa_cmd_list(int argc, char **argv);
int aa_cmd_run(int argc, char **argv);
int aa_cmd_explain(int argc, char **argv);
int aa_cmd_invariance(int argc, char **argv);
int aa_cmd_closest(int argc, char **argv);
int aa_cmd_score(int argc, char **argv);
int aa_cmd_expmap(int argc, char **argv);
int aa_cmd_determinism(int argc, char **argv);
int aa_cmd_dqbudget(int argc, char **argv);
int aa_cmd_dropout_map(int argc, char **argv);
int aa_cmd_table3(int argc, char **argv);
int aa_cmd_normmap(int argc, char **argv);
int aa_cmd_sweep(int argc, char **argv);
int aa_cmd_report(int argc, char **argv);
int aa_cmd_main(int argc, char **argv);

#endif
