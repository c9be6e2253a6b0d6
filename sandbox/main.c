/*
 * main.c: kforge-jail, a thin wrapper over kf_jail_run() (jail.h).
 *
 * Prints nothing of its own except one line on stderr, after the command's captured output,
 * in two cases: "kforge-jail: REASON" when the jail itself failed (exit status 125), and
 * "kforge-jail: limit disk: ..." when the command passed its disk quota, the one limit that
 * the jail enforces and that neither the exit status nor the output shows to a caller without
 * --report (see README.md). The command's captured stdout and stderr are written to ours once
 * it has ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "jail.h"
#include "util.h"

/* The line for a disk quota that was passed (limit disk). */
static void print_disk_limit(const struct kf_jail_opts *o, const struct kf_jail_result *r) {
    unsigned long long files = o->disk_files > 0 ? o->disk_files : KF_JAIL_DISK_FILES_DEFAULT;
    switch (r->disk_over) {
    case KF_DISK_OVER_BYTES:
        fprintf(stderr, "kforge-jail: limit disk: the writable paths held more than %llu MiB\n",
                (unsigned long long)o->disk_mib);
        break;
    case KF_DISK_OVER_FILES:
        fprintf(stderr, "kforge-jail: limit disk: the writable paths held more than %llu entries\n",
                files);
        break;
    case KF_DISK_UNMEASURABLE:
    case KF_DISK_UNDER:
        fputs("kforge-jail: limit disk: the writable paths could not be measured (a directory "
              "that cannot be read, or one too deep)\n",
              stderr);
        break;
    }
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN); /* a closed stdout must not kill the supervisor */
    struct kf_jail_args a;
    char err[512] = "";
    int prc = kf_jail_args_parse(&a, argc, argv, err, sizeof(err));
    if (prc == 1) {
        fputs(kf_jail_usage(), stdout);
        kf_jail_args_free(&a);
        return 0;
    }
    if (prc != 0) {
        fprintf(stderr, "kforge-jail: %s\n", err);
        kf_jail_args_free(&a);
        return KF_JAIL_EXIT_SETUP;
    }
    int in = -1;
    if (a.stdin_path != NULL) {
        in = open(a.stdin_path, O_RDONLY | O_CLOEXEC);
        if (in < 0) {
            fprintf(stderr, "kforge-jail: --stdin %s: %s\n", a.stdin_path, strerror(errno));
            kf_jail_args_free(&a);
            return KF_JAIL_EXIT_SETUP;
        }
        a.opts.stdin_fd = in;
    }
    struct kf_jail_result r;
    (void)kf_jail_run(&a.opts, &r);
    if (in >= 0)
        close(in);
    if (r.out_len > 0)
        (void)kf_write_all(1, r.out, r.out_len);
    if (r.err_len > 0)
        (void)kf_write_all(2, r.err, r.err_len);
    if (r.setup_failed)
        fprintf(stderr, "kforge-jail: %s\n", r.error);
    else if (r.limit == KF_LIMIT_DISK)
        print_disk_limit(&a.opts, &r);
    if (a.report_path != NULL && kf_jail_write_report(a.report_path, &r) != 0 && !r.setup_failed) {
        fprintf(stderr, "kforge-jail: --report %s: %s\n", a.report_path, strerror(errno));
        r.exit_code = KF_JAIL_EXIT_SETUP;
    }
    int code = r.exit_code;
    kf_jail_result_free(&r);
    kf_jail_args_free(&a);
    return code;
}
