/*
 * args.h: the command line of kforge-jail, parsed into kf_jail_opts (see README.md):
 *
 *   kforge-jail --profile build|shell|run [--gpu N] --workdir DIR [--ro PATH]... [--rw PATH]...
 *               [--time SECONDS] [--mem MIB] [--pids N] [--output-limit KIB] [--cpu SECONDS]
 *               [--cpus N] [--fsize MIB] [--disk MIB] [--disk-files N] [--nofile N]
 *               [--tmp-size MIB] [--shm-size MIB]
 *               [--env NAME[=VALUE]]... [--stdin FILE] [--host-uid UID] [--host-gid GID]
 *               [--cgroup-parent DIR] [--report FILE] [--record FILE] [--no-auto-python]
 *               -- COMMAND [ARGS...]
 */
#ifndef KFORGE_SANDBOX_ARGS_H
#define KFORGE_SANDBOX_ARGS_H

#include <stddef.h>

#include "jail.h"

struct kf_jail_args {
    struct kf_jail_opts opts;     /* its arrays point into the fields below and into argv */
    const char *report_path;      /* --report, or NULL */
    const char *stdin_path;       /* --stdin, or NULL */
    const char **ro, **rw, **env; /* malloc'd arrays of pointers into argv */
};

/* Parses argv (which must outlive a). Returns 0, 1 when --help was asked for, or -1 with a
 * one-line reason in err. Free a with kf_jail_args_free() whatever the result. */
int kf_jail_args_parse(struct kf_jail_args *a, int argc, char **argv, char *err, size_t n);

/* Frees the arrays that a owns. */
void kf_jail_args_free(struct kf_jail_args *a);

/* The usage text. Static string. */
const char *kf_jail_usage(void);

#endif
