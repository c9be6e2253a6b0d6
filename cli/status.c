/* status.c: `kforge status [--var DIR] [--url U]`: the server's /readyz answer and a summary of
 * /metrics (queue depths, jobs by status, live workers). Exit 0 when ready. */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool wanted(const char *line) {
    static const char *const names[] = {"kforge_queue_depth", "kforge_queue_pending", "kforge_jobs",
                                        "kforge_worker_up"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t n = strlen(names[i]);
        if (strncmp(line, names[i], n) == 0 && (line[n] == '{' || line[n] == ' '))
            return true;
    }
    return false;
}

int kfc_status_main(int argc, char **argv) {
    const char *var_opt = NULL, *url_opt = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--var") == 0 && i + 1 < argc) {
            var_opt = argv[++i];
        } else if (strcmp(argv[i], "--url") == 0 && i + 1 < argc) {
            url_opt = argv[++i];
        } else {
            fprintf(stderr, "usage: kforge status [--var DIR] [--url U]\n");
            return 2;
        }
    }
    char var[PATH_MAX], url[512], target[600];
    kfc_var_dir(var_opt, var, sizeof(var));
    const char *env = getenv("KFORGE_URL");
    if (url_opt)
        snprintf(url, sizeof(url), "%s", url_opt);
    else if (env && env[0])
        snprintf(url, sizeof(url), "%s", env);
    else if (!kfc_stack_get(var, "KFORGE_URL", url, sizeof(url))) {
        fprintf(stderr, "kforge status: no %s/stack.env: is the stack up (`kforge up`)?\n", var);
        return 1;
    }
    printf("url: %s\n", url);
    char *body = NULL;
    snprintf(target, sizeof(target), "%s/readyz", url);
    long code = kfc_http("GET", target, NULL, NULL, &body, 5, false);
    if (code < 0) {
        printf("server: not answering\n");
        return 1;
    }
    printf("readyz: %ld %s", code, body ? body : "");
    if (body == NULL || body[0] == '\0' || body[strlen(body) - 1] != '\n')
        printf("\n");
    free(body);
    body = NULL;
    snprintf(target, sizeof(target), "%s/metrics", url);
    if (kfc_http("GET", target, NULL, NULL, &body, 5, false) == 200 && body) {
        for (char *line = strtok(body, "\n"); line; line = strtok(NULL, "\n")) {
            if (wanted(line))
                printf("  %s\n", line);
        }
    }
    free(body);
    return code == 200 ? 0 : 1;
}
