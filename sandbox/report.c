/* report.c: the one-line JSON report of a run (kforge-jail --report FILE). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "jail.h"

static void json_string(FILE *f, const char *s) {
    if (s == NULL || s[0] == '\0') {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

int kf_jail_write_report(const char *path, const struct kf_jail_result *r) {
    FILE *f = fopen(path, "we");
    if (f == NULL)
        return -1;
    fprintf(f, "{\"exit\":%d,\"signal\":", r->exit_code);
    if (r->signal > 0)
        fprintf(f, "%d", r->signal);
    else
        fputs("null", f);
    fputs(",\"limit\":", f);
    json_string(f, kf_jail_limit_name(r->limit));
    fprintf(f,
            ",\"wall_ms\":%llu,\"cpu_ms\":%llu,\"maxrss_kib\":%llu,\"stdout_bytes\":%zu,"
            "\"stderr_bytes\":%zu,\"truncated\":%s,\"error\":",
            (unsigned long long)r->wall_ms, (unsigned long long)r->cpu_ms,
            (unsigned long long)r->maxrss_kib, r->out_len, r->err_len,
            r->output_truncated ? "true" : "false");
    json_string(f, r->setup_failed ? r->error : NULL);
    fputs(",\"memory\":", f);
    json_string(f, r->memory_enforcement);
    fputs(",\"pids\":", f);
    json_string(f, r->pids_enforcement);
    if (r->disk_measured)
        fprintf(f, ",\"disk_kib\":%llu,\"disk_files\":%llu", (unsigned long long)r->disk_kib,
                (unsigned long long)r->disk_files);
    else
        fputs(",\"disk_kib\":null,\"disk_files\":null", f);
    fputs(",\"notes\":", f);
    json_string(f, r->notes);
    fputs("}\n", f);
    if (fclose(f) != 0)
        return -1;
    return 0;
}
