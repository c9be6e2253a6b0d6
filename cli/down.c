/* down.c: `kforge down [--var DIR]` stops the local stack of `kforge up`: the workers first
 * (SIGTERM: each finishes or hands back its job), then the server, Redis and PostgreSQL
 * (`pg_ctl stop -m fast`). Only processes named in var/run's pid files whose program is the
 * expected one are signalled. */
#include "cli.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PIDS 128

struct target {
    char pidfile[PATH_MAX + 300];
    const char *exe;
    pid_t pid;
};

/* Signals every live target, waits up to wait_ms for all to end, then SIGKILLs the rest. */
static void stop_all(struct target *t, int n, int wait_ms, bool quiet) {
    for (int i = 0; i < n; i++) {
        if (kfc_pid_is(t[i].pid, t[i].exe)) {
            kill(t[i].pid, SIGTERM);
            if (!quiet)
                printf("stopping %s (pid %d)\n", t[i].exe, (int)t[i].pid);
        } else {
            t[i].pid = -1;
        }
    }
    for (int waited = 0; waited <= wait_ms; waited += 100) {
        bool any = false;
        for (int i = 0; i < n; i++)
            any |= kfc_pid_is(t[i].pid, t[i].exe);
        if (!any)
            break;
        struct timespec s = {0, 100000000L};
        nanosleep(&s, NULL);
    }
    for (int i = 0; i < n; i++) {
        if (kfc_pid_is(t[i].pid, t[i].exe)) {
            fprintf(stderr, "kforge down: %s (pid %d) did not stop: killed\n", t[i].exe,
                    (int)t[i].pid);
            kill(t[i].pid, SIGKILL);
        }
        unlink(t[i].pidfile);
    }
}

static int add(struct target *t, int n, const char *var, const char *file, const char *exe) {
    if (n >= MAX_PIDS)
        return n;
    snprintf(t[n].pidfile, sizeof(t[n].pidfile), "%s/run/%s", var, file);
    t[n].exe = exe;
    t[n].pid = kfc_read_pid(t[n].pidfile);
    return t[n].pid > 0 ? n + 1 : n;
}

void kfc_programs_stop(const char *var, bool quiet) {
    static struct target t[MAX_PIDS];
    char dir[PATH_MAX + 8];
    snprintf(dir, sizeof(dir), "%s/run", var);
    int n = 0;
    DIR *d = opendir(dir);
    while (d) {
        struct dirent *e = readdir(d);
        if (e == NULL)
            break;
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "worker-", 7) == 0 && len > 4 &&
            strcmp(e->d_name + len - 4, ".pid") == 0)
            n = add(t, n, var, e->d_name, "kforge-worker");
    }
    if (d)
        closedir(d);
    stop_all(t, n, 20000, quiet);
    n = add(t, 0, var, "server.pid", "kforge-server");
    stop_all(t, n, 10000, quiet);
}

void kfc_stack_stop(const char *var, const char *pgbin, bool quiet) {
    struct target redis[1];
    kfc_programs_stop(var, quiet);
    int n = add(redis, 0, var, "redis.pid", "redis-server");
    stop_all(redis, n, 10000, quiet);

    char pidf[PATH_MAX + 32], data[PATH_MAX + 8], ctl[PATH_MAX + 16];
    snprintf(data, sizeof(data), "%s/pg", var);
    snprintf(pidf, sizeof(pidf), "%s/postmaster.pid", data);
    if (access(pidf, F_OK) != 0)
        return;
    snprintf(ctl, sizeof(ctl), "%s/pg_ctl", pgbin);
    const char *a[] = {ctl, "-D", data, "-m", "fast", "-w", "stop", NULL};
    int rc = kfc_run(kfc_pg_user(), a, quiet ? "/dev/null" : NULL);
    if (rc != 0 && !quiet)
        fprintf(stderr, "kforge down: pg_ctl stop exited %d\n", rc);
}

int kfc_down_main(int argc, char **argv) {
    const char *var_opt = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--var") == 0 && i + 1 < argc) {
            var_opt = argv[++i];
        } else {
            fprintf(stderr, "usage: kforge down [--var DIR]\n");
            return 2;
        }
    }
    char var[PATH_MAX], pgbin[PATH_MAX];
    kfc_var_dir(var_opt, var, sizeof(var));
    kfc_pg_bindir(pgbin, sizeof(pgbin));
    kfc_stack_stop(var, pgbin, false);
    printf("stopped\n");
    return 0;
}
