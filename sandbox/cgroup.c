/*
 * cgroup.c: one cgroup v2 per jail, made under the caller's own cgroup (or a given parent)
 * when that cgroup has the memory and pids controllers in its subtree_control, or can be
 * given them (only where it holds no process itself: cgroup v2's "no internal processes").
 */
#include "cgroup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static void note_add(char *note, size_t n, const char *s) {
    if (note[0] != '\0')
        kf_strlcat(note, " ", n);
    kf_strlcat(note, s, n);
}

/* Finds the cgroup v2 directory of this process: "<mountpoint><path in /proc/self/cgroup>". */
static int own_cgroup_dir(char *out, size_t n) {
    char buf[8192];
    if (kf_read_file("/proc/self/cgroup", buf, sizeof(buf)) < 0)
        return -1;
    char *line = strstr(buf, "0::");
    if (line != NULL && line != buf && line[-1] != '\n')
        line = NULL;
    if (line == NULL)
        return -1;
    char cgpath[PATH_MAX];
    line += 3;
    size_t len = strcspn(line, "\n");
    if (len >= sizeof(cgpath))
        return -1;
    memcpy(cgpath, line, len);
    cgpath[len] = '\0';

    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL)
        return -1;
    char l[4096];
    int rc = -1;
    while (rc != 0 && fgets(l, sizeof(l), f) != NULL) {
        char root[PATH_MAX], mnt[PATH_MAX];
        const char *sep = strstr(l, " - cgroup2 ");
        if (sep == NULL || sscanf(l, "%*s %*s %*s %4095s %4095s", root, mnt) != 2)
            continue;
        const char *rel = cgpath;
        size_t rl = strlen(root);
        if (strcmp(root, "/") != 0) {
            if (strncmp(cgpath, root, rl) != 0)
                continue;
            rel = cgpath + rl;
        }
        kf_strlcpy(out, mnt, n);
        if (kf_strlcat(out, strcmp(rel, "/") == 0 ? "" : rel, n) < n)
            rc = 0;
    }
    fclose(f);
    return rc;
}

static bool has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
            return true;
    return false;
}

static bool controller_enabled(const char *dir, const char *name) {
    char path[PATH_MAX + 32], buf[512];
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
    if (kf_read_file(path, buf, sizeof(buf)) < 0)
        return false;
    if (has_word(buf, name))
        return true;
    char cmd[32];
    snprintf(cmd, sizeof(cmd), "+%s", name);
    return kf_write_file(path, cmd) == 0;
}

static int write_limit(const char *dir, const char *file, const char *value) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    return kf_write_file(path, value);
}

void kf_cgroup_create(struct kf_cgroup *cg, const struct kf_jail_opts *o, char *note, size_t n) {
    memset(cg, 0, sizeof(*cg));
    bool want_mem = o->mem_mib > 0, want_pids = o->pids > 0, want_cpu = o->cpus > 0;
    if (!want_mem && !want_pids && !want_cpu)
        return;
    char parent[PATH_MAX];
    if (o->cgroup_parent != NULL) {
        kf_strlcpy(parent, o->cgroup_parent, sizeof(parent));
    } else if (own_cgroup_dir(parent, sizeof(parent)) != 0) {
        note_add(note, n, "no cgroup v2 hierarchy found: limits fall back to rlimits.");
        return;
    }
    char avail[512] = "", path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/cgroup.controllers", parent);
    if (kf_read_file(path, avail, sizeof(avail)) < 0) {
        note_add(note, n, "cgroup v2 directory unreadable: limits fall back to rlimits.");
        return;
    }
    bool mem = want_mem && has_word(avail, "memory") && controller_enabled(parent, "memory");
    bool pids = want_pids && has_word(avail, "pids") && controller_enabled(parent, "pids");
    bool cpu = want_cpu && has_word(avail, "cpu") && controller_enabled(parent, "cpu");
    if ((want_mem && !mem) || (want_pids && !pids)) {
        char s[PATH_MAX + 256];
        avail[strcspn(avail, "\n")] = '\0';
        snprintf(s, sizeof(s),
                 "cgroup v2 %s does not delegate %s (its controllers: %.100s): %s back to "
                 "rlimits.",
                 parent,
                 want_mem && !mem && want_pids && !pids ? "memory and pids"
                 : want_mem && !mem                     ? "memory"
                                                        : "pids",
                 avail[0] ? avail : "none",
                 want_mem && !mem && want_pids && !pids ? "those limits fall" : "that limit falls");
        note_add(note, n, s);
    }
    if (!mem && !pids && !cpu)
        return;

    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int len = snprintf(cg->path, sizeof(cg->path), "%s/kforge-jail-%d-%d-%lld%09ld", parent,
                       getpid(), gettid(), (long long)ts.tv_sec, ts.tv_nsec);
    if (len < 0 || (size_t)len >= sizeof(cg->path) || mkdir(cg->path, 0755) != 0) {
        char s[PATH_MAX + 64];
        snprintf(s, sizeof(s), "cannot create a cgroup in %s (%s): limits fall back to rlimits.",
                 parent, strerror(errno));
        note_add(note, n, s);
        return;
    }
    cg->active = true;
    char v[64];
    if (mem) {
        snprintf(v, sizeof(v), "%llu", (unsigned long long)o->mem_mib << 20);
        cg->memory = write_limit(cg->path, "memory.max", v) == 0;
        (void)write_limit(cg->path, "memory.swap.max", "0");
        (void)write_limit(cg->path, "memory.oom.group", "1");
    }
    if (pids) {
        snprintf(v, sizeof(v), "%llu", (unsigned long long)o->pids);
        cg->pids = write_limit(cg->path, "pids.max", v) == 0;
    }
    if (cpu) {
        snprintf(v, sizeof(v), "%llu 100000", (unsigned long long)(o->cpus * 100000.0 + 0.5));
        cg->cpu = write_limit(cg->path, "cpu.max", v) == 0;
    }
    if (want_cpu && !cg->cpu)
        note_add(note, n, "cgroup cpu.max not available: no CPU bandwidth limit.");
}

int kf_cgroup_attach(const struct kf_cgroup *cg, pid_t pid) {
    char v[32];
    snprintf(v, sizeof(v), "%d", (int)pid);
    return write_limit(cg->path, "cgroup.procs", v);
}

static long long event_count(const char *dir, const char *file, const char *key) {
    char path[PATH_MAX + 64], buf[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (kf_read_file(path, buf, sizeof(buf)) < 0)
        return 0;
    size_t kl = strlen(key);
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
            return atoll(l + kl + 1);
    return 0;
}

void kf_cgroup_events(const struct kf_cgroup *cg, bool *oom, bool *pids_max) {
    *oom = cg->memory && (event_count(cg->path, "memory.events", "oom_kill") > 0 ||
                          event_count(cg->path, "memory.events", "oom_group_kill") > 0);
    *pids_max = cg->pids && event_count(cg->path, "pids.events", "max") > 0;
}

void kf_cgroup_kill(const struct kf_cgroup *cg) {
    if (cg->active)
        (void)write_limit(cg->path, "cgroup.kill", "1");
}

void kf_cgroup_destroy(struct kf_cgroup *cg) {
    if (!cg->active)
        return;
    for (int i = 0; i < 200; i++) { /* the last tasks may still be leaving */
        if (rmdir(cg->path) == 0 || errno != EBUSY)
            break;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    cg->active = false;
}
