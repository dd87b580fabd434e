/* attnacc: the `list` command: recipes, accumulation models, oracle paths and commands. */
/* SPDX-License-Identifier: LGPL-3.0-or-later */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "commands.h"
#include "xp/xp.h"

static const cli_opt_t opts[] = {
    {"keys", NULL, NULL, "print the recipe key table instead: key, default, values, rounding site, description"},
    {"recipe", "NAME", NULL, "print the recipe file that preset NAME is (lib/recipe/presets/NAME.recipe)"},
};

/* The key table (lib/recipe.h aa_recipe_key_info), one key per two lines. */
static int print_keys(void) {
  printf("recipe keys (KEY DEFAULT VALUES; 'rounding -> X': a rounding site, exact with X; attnacc explain):\n");
  for (size_t i = 0; i < aa_recipe_key_count(); i++) {
    aa_recipe_key_info_t k;
    char vals[256] = "";
    aa_recipe_key_info(&k, i);
    if (k.names != NULL) {
      size_t used = 0;
      for (int j = 0; k.names[j] != NULL && used < sizeof vals; j++)
        used += (size_t)snprintf(vals + used, sizeof vals - used, "%s%s", j ? "|" : "", k.names[j]);
    } else if (k.max > 0) {
      snprintf(vals, sizeof vals, "%s 0..%zu", k.values, k.max);
    } else {
      snprintf(vals, sizeof vals, "%s", k.values);
    }
    printf("  %-22s %-14s %s%s%s%s%s\n", k.key, k.def[0] ? k.def : "-", vals, k.exact ? "  rounding -> " : "",
           k.exact ? k.exact : "", k.flags & AA_RECIPE_KEY_OMITTED ? "  (written only when not default)" : "",
           k.flags & AA_RECIPE_KEY_MACRO ? "  (macro, not stored)" : "");
    printf("      %s%s%s%s\n", k.desc, k.cite[0] ? " (" : "", k.cite, k.cite[0] ? ")" : "");
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

int aa_cmd_list(int argc, char **argv) {
  cli_args_t a;
  int rc;
  if ((rc = cli_args_parse(&a, "list", "",
                           "List the preset recipes, the accumulation models, the oracle paths and\n"
                           "the commands, one per line with a short description. --keys prints the\n"
                           "recipe key table (lib/recipe/KEYS.md says more); --recipe NAME prints the\n"
                           "recipe file that preset NAME is, comments included.",
                           opts, sizeof opts / sizeof opts[0], argc, argv)) >= 0)
    return rc;
  if (cli_get(&a, "recipe") != NULL) {
    const char *name = cli_get(&a, "recipe"), *text = aa_recipe_preset_text(name);
    if (text == NULL) {
      fprintf(stderr, "attnacc list: --recipe: unknown preset '%s' (attnacc list shows the presets)\n", name);
      return 2;
    }
    fputs(text, stdout);
    return fflush(stdout) == 0 ? 0 : 1;
  }
  if (cli_get(&a, "keys") != NULL) return print_keys();
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
