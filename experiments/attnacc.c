/* attnacc: the command-line front end; dispatches to the subcommands listed in aa_commands[]. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "commands.h"
#include "version.h"

/* To add a command: write experiments/cmd/<name>.c with aa_cmd_<name> (an
   experiment of `attnacc sweep` goes in experiments/xp/), declare it in
   commands.h, add the source in experiments/local.mk and one line here. */
const aa_command_t aa_commands[] = {
    {"list", aa_cmd_list, "list recipes, accumulation models, oracle paths and commands"},
    {"run", aa_cmd_run, "emulate variants on one problem and compare them with the oracle"},
    {"explain", aa_cmd_explain, "a recipe's error budget: each rounding site made exact in turn, per output"},
    {"invariance", aa_cmd_invariance,
     "does a sequence keep its output bits inside batches of other sizes (FA2 split-KV decisions)"},
    {"closest", aa_cmd_closest, "which preset a kernel's outputs are closest to, by their error profile per tensor"},
    {"score", aa_cmd_score,
     "score a kernel's outputs (.npy folders, .npz, .safetensors; any layout) against the oracle: rules, verdict"},
    {"expmap", aa_cmd_expmap, "exhaustive or sampled error map of an exp construction (ratio, errors, NaN regions)"},
    {"table3", aa_cmd_table3,
     "packed BF16 exp accuracy (Table 3 of the Blackwell FlashAttention paper) for every exp construction"},
    {"dropout-map", aa_cmd_dropout_map, "dropout mask redraw mismatch and gradient error over p, n and tiling"},
    {"normmap", aa_cmd_normmap,
     "where the fixed shift and the guarded causal route break: sigma x n x d x seeds map"},
    {"determinism", aa_cmd_determinism,
     "run one cell R times with different dQ order seeds: distinct bit patterns, the spread (rel_l2, mean ULP)"},
    {"dq-budget", aa_cmd_dqbudget,
     "fixed-point dQ budget map: fallback fraction and added error over n, mask, sigma, scale"},
    {"sweep", aa_cmd_sweep, "run an experiment's grid (attnacc list shows them): resumable, sharded, threaded, MPI"},
    {"main", aa_cmd_main,
     "the first run: table4 --quick, table3 (sampled), exp curves and the report; prints its path"},
    {"report", aa_cmd_report, "turn result folders into a Markdown report with tables and gnuplot plots"},
};
const size_t aa_command_count = sizeof aa_commands / sizeof aa_commands[0];

static void usage(FILE *f) {
  fprintf(f, "usage: attnacc COMMAND [OPTIONS]\n"
             "       attnacc COMMAND --help\n"
             "       attnacc --version\n\n"
             "Emulate flash-attention backward passes in bit-faithful BF16/FP32 and compare\n"
             "them with an MPFR-backed oracle.\n\ncommands:\n");
  for (size_t i = 0; i < aa_command_count; i++)
    fprintf(f, "  %-10s %s\n", aa_commands[i].name, aa_commands[i].summary);
}

static int dispatch(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("attnacc %s (git %s)\n", AA_VERSION, AA_GIT_HASH);
    return 0;
  }
  for (size_t i = 0; i < aa_command_count; i++)
    if (strcmp(argv[1], aa_commands[i].name) == 0) return aa_commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "attnacc: unknown command '%s' (commands:", argv[1]);
  for (size_t i = 0; i < aa_command_count; i++)
    fprintf(stderr, "%s %s", i ? "," : "", aa_commands[i].name);
  fprintf(stderr, "; see attnacc --help)\n");
  return 2;
}

/* Every command's stdout is checked once here, at the end: a report that
   could not be written (disk full, /dev/full) is an error, not exit 0. */
int main(int argc, char **argv) {
  int status = dispatch(argc, argv);
  return cli_close_stdout(argc >= 2 ? argv[1] : "", status);
}
