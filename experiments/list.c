/* attnacc: the `list` command: recipes, accumulation models, oracle paths and commands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "experiments.h"

static const cli_opt_t opts[] = {{"dummy-never-used", NULL, NULL, ""}};

int aa_cmd_list(int argc, char **argv) {
  cli_args_t a;
  int rc;
  if ((rc = cli_args_parse(&a, "list", "",
                           "List the preset recipes, the accumulation models, the oracle paths and\n"
                           "the commands, one per line with a short description.",
                           opts, 0, argc, argv)) >= 0)
    return rc;
  printf("recipes (attnacc run --variant NAME):\n");
  for (size_t i = 0; i < aa_recipe_preset_count(); i++)
    printf("  %-16s %s\n", aa_recipe_preset_name(i), aa_recipe_preset_describe(i));
  printf("\naccumulation models (names used in recipe files):\n");
  for (int m = 0; m < AA_ACC_COUNT; m++)
    printf("  %-16s %s\n", aa_accum_name((aa_accum_t)m), aa_accum_describe((aa_accum_t)m));
  printf("\noracle paths (--oracle):\n");
  for (int p = 0; p < AA_ORACLE_COUNT; p++)
    printf("  %-16s %s\n", aa_oracle_path_name((aa_oracle_path_t)p), aa_oracle_path_describe((aa_oracle_path_t)p));
  printf("\ncommands:\n");
  for (size_t i = 0; i < aa_command_count; i++)
    printf("  %-16s %s\n", aa_commands[i].name, aa_commands[i].summary);
  printf("\nexperiments (attnacc sweep --experiment NAME; options: attnacc sweep --experiment NAME --help):\n");
  for (size_t i = 0; i < xp_experiment_count; i++)
    if (!xp_experiments[i]->hidden) printf("  %-16s %s\n", xp_experiments[i]->name, xp_experiments[i]->summary);
  return fflush(stdout) == 0 ? 0 : 1;
}
