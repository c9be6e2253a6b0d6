/* tools_probe.c: one kf_tool_run call from the command line, for the tests (tools.h).
 *
 *   tools_probe --workspace DIR --jail PATH [--readonly NAME]... [--max-output N]
 *               [--max-file-bytes N] [--bash-timeout S] [--bash-mem MIB] [--bash-disk MIB]
 * [--bash-ro PATH]... TOOL ARGS_JSON tools_probe --definitions
 *
 * Prints one JSON object on stdout: {"text", "is_error", "malformed", "full_bytes",
 * "truncated", "seconds", "rc"} (rc: kf_tool_run's return, 0 or -1); ARGS_JSON that does not
 * parse is passed as NULL. With --definitions, prints kf_tool_definitions(). Exit 0 when it
 * printed that (whatever rc), 2 on bad usage. */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 64

struct opts {
    struct kf_tool_ctx ctx;
    const char *readonly[MAX_LIST + 1];
    const char *bash_ro[MAX_LIST + 1];
    size_t n_readonly, n_bash_ro;
    const char *tool, *args;
    int definitions;
};

static int usage(const char *why) {
    fprintf(stderr,
            "tools_probe: %s\nusage: tools_probe --workspace DIR --jail PATH [--readonly NAME]... "
            "[--max-output N] [--max-file-bytes N] [--bash-timeout S] [--bash-mem MIB] "
            "[--bash-disk MIB] "
            "[--bash-ro PATH]... TOOL ARGS_JSON\n       tools_probe --definitions\n",
            why);
    return 2;
}

/* Fills o from argv (the strings stay argv's). Returns 0, or -1 with *why set. */
static int parse(int argc, char **argv, struct opts *o, const char **why) {
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--definitions") == 0) {
            o->definitions = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (pos == 0)
                o->tool = a;
            else if (pos == 1)
                o->args = a;
            else {
                *why = "too many arguments";
                return -1;
            }
            pos++;
            continue;
        }
        if (i + 1 >= argc) {
            *why = "an option lacks its value (or is unknown)";
            return -1;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--workspace") == 0) {
            o->ctx.workspace = v;
        } else if (strcmp(a, "--jail") == 0) {
            o->ctx.jail = v;
        } else if (strcmp(a, "--readonly") == 0 && o->n_readonly < MAX_LIST) {
            o->readonly[o->n_readonly++] = v;
        } else if (strcmp(a, "--bash-ro") == 0 && o->n_bash_ro < MAX_LIST) {
            o->bash_ro[o->n_bash_ro++] = v;
        } else if (strcmp(a, "--max-output") == 0) {
            o->ctx.max_output = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--max-file-bytes") == 0) {
            o->ctx.max_file_bytes = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--bash-timeout") == 0) {
            o->ctx.bash_timeout_s = strtod(v, NULL);
        } else if (strcmp(a, "--bash-mem") == 0) {
            o->ctx.bash_mem_mib = atoi(v);
        } else if (strcmp(a, "--bash-disk") == 0) {
            o->ctx.bash_disk_mib = atol(v);
        } else {
            *why = "unknown option";
            return -1;
        }
    }
    if (!o->definitions && (o->tool == NULL || o->args == NULL || o->ctx.workspace == NULL)) {
        *why = "TOOL, ARGS_JSON and --workspace are needed";
        return -1;
    }
    o->ctx.readonly = o->readonly;
    o->ctx.bash_ro = o->bash_ro;
    return 0;
}

int main(int argc, char **argv) {
    struct opts o;
    memset(&o, 0, sizeof(o));
    const char *why = NULL;
    if (parse(argc, argv, &o, &why) != 0)
        return usage(why);
    if (o.definitions) {
        json_t *defs = kf_tool_definitions();
        if (defs == NULL || json_dumpf(defs, stdout, JSON_INDENT(2)) != 0) {
            fprintf(stderr, "tools_probe: out of memory\n");
            return 1;
        }
        putchar('\n');
        json_decref(defs);
        return 0;
    }
    json_t *args = json_loads(o.args, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    struct kf_tool_result r;
    int rc = kf_tool_run(&o.ctx, o.tool, args, &r);
    json_decref(args);
    json_t *doc =
        json_pack("{s:s?,s:b,s:b,s:I,s:b,s:f,s:i}", "text", r.text, "is_error", r.is_error,
                  "malformed", r.malformed, "full_bytes", (json_int_t)r.full_bytes, "truncated",
                  r.truncated, "seconds", r.seconds, "rc", rc);
    kf_tool_result_free(&r);
    if (doc == NULL || json_dumpf(doc, stdout, JSON_ENSURE_ASCII) != 0) {
        fprintf(stderr, "tools_probe: cannot print the result\n");
        json_decref(doc);
        return 1;
    }
    putchar('\n');
    json_decref(doc);
    return 0;
}
