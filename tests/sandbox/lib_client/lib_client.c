/*
 * lib_client.c: uses libkforge_jail.a as the worker does, from several threads at once.
 *
 *   lib_client WORKDIR N
 *
 * Starts N threads; thread i runs `sh -c 'echo out-i; echo err-i >&2; exit i'` in the shell
 * profile with a 10 s wall clock, and prints one line per thread:
 *   i exit=E signal=S limit=L out=<stdout without newline> err=<stderr without newline>
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jail.h"

struct job {
    int index;
    const char *workdir;
    struct kf_jail_result result;
    int rc;
};

static void *run(void *arg) {
    struct job *j = arg;
    char script[128];
    snprintf(script, sizeof(script), "echo out-%d; echo err-%d >&2; exit %d", j->index, j->index,
             j->index);
    const char *argv[] = {"sh", "-c", script, NULL};
    struct kf_jail_opts o;
    kf_jail_opts_init(&o);
    o.profile = KF_JAIL_SHELL;
    o.workdir = j->workdir;
    o.argv = argv;
    o.time_ms = 10000;
    j->rc = kf_jail_run(&o, &j->result);
    return NULL;
}

static void chomp(char *s) {
    if (s != NULL)
        s[strcspn(s, "\n")] = '\0';
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    int n = atoi(argv[2]);
    struct job *jobs = calloc((size_t)n, sizeof(*jobs));
    pthread_t *threads = calloc((size_t)n, sizeof(*threads));
    if (jobs == NULL || threads == NULL)
        return 2;
    for (int i = 0; i < n; i++) {
        jobs[i].index = i;
        jobs[i].workdir = argv[1];
        pthread_create(&threads[i], NULL, run, &jobs[i]);
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        struct kf_jail_result *r = &jobs[i].result;
        chomp(r->out);
        chomp(r->err);
        const char *limit = kf_jail_limit_name(r->limit);
        printf("%d exit=%d signal=%d limit=%s out=%s err=%s%s%s\n", i, r->exit_code, r->signal,
               limit ? limit : "none", r->out ? r->out : "", r->err ? r->err : "",
               r->setup_failed ? " error=" : "", r->setup_failed ? r->error : "");
        bad |= jobs[i].rc != 0;
        kf_jail_result_free(r);
    }
    free(jobs);
    free(threads);
    return bad;
}
