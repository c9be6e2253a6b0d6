/* main.c: build/kforge, the command-line tool. One subcommand per file (cli/README.md). */
#include "cli.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;
};

static const struct subcommand subcommands[] = {
    {"migrate", kfc_migrate_main, "migrate [--database-url URL]"},
    {"keys", kfc_keys_main,
     "keys create [--owner O] [--name N] [--scope read|submit|admin]... | keys list [--owner O]"
     " | keys revoke PREFIX | keys quota OWNER [--active-jobs N] [--gpu-s-per-day S]"
     "  [--database-url URL]"},
    {"up", kfc_up_main, "up [--var DIR] [--port N] [--cpu | --gpus 0,1]"},
    {"down", kfc_down_main, "down [--var DIR]"},
    {"status", kfc_status_main, "status [--var DIR] [--url U]"},
    {"eval", kfc_eval_main,
     "eval TASK.py CANDIDATE_DIR [--backend cuda|cpu] [--url U] [--key K] [--wait S]"},
};

#define N_SUB (sizeof(subcommands) / sizeof(subcommands[0]))

static void usage(FILE *f) {
    fprintf(f, "usage: kforge COMMAND ...\n");
    for (size_t i = 0; i < N_SUB; i++)
        fprintf(f, "  kforge %s\n", subcommands[i].usage);
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < N_SUB; i++) {
        if (strcmp(argv[1], subcommands[i].name) == 0) {
            curl_global_init(CURL_GLOBAL_DEFAULT);
            int rc = subcommands[i].fn(argc - 1, argv + 1);
            curl_global_cleanup();
            return rc;
        }
    }
    fprintf(stderr, "kforge: unknown command %s\n", argv[1]);
    usage(stderr);
    return 2;
}
