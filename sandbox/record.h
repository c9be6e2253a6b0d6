/*
 * record.h: the record mode's bookkeeping. The command's seccomp filter sends each syscall
 * outside the allow-list to a listener (SECCOMP_RET_USER_NOTIF); the supervisor writes the
 * syscall down and lets it run (SECCOMP_USER_NOTIF_FLAG_CONTINUE). At the end the list of
 * syscalls seen goes to a file, for sandbox/record-syscalls.sh to merge into the lists.
 */
#ifndef KFORGE_SANDBOX_RECORD_H
#define KFORGE_SANDBOX_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KF_RECORD_MAX 1024

struct kf_record_entry {
    int nr;
    bool has_arg; /* arg0 matters: the filter checks it */
    uint64_t arg0;
    uint64_t count;
};

struct kf_record {
    int listener; /* the seccomp listener fd, -1 until the command passed it */
    struct kf_record_entry entries[KF_RECORD_MAX];
    size_t n;
};

void kf_record_init(struct kf_record *rec);

/* Receives the listener fd on the socket sock. Returns 0 or -1. */
int kf_record_take_listener(struct kf_record *rec, int sock);

/* Receives one notification from the listener, writes it down and lets the syscall run.
 * Returns 0, or -1 when the listener is gone (every filtered process ended). */
int kf_record_handle(struct kf_record *rec);

/* Writes "name count" lines (name "socket/2" for an argument-checked syscall with its first
 * argument), sorted by name, to path. Returns 0 or -1 with errno set. */
int kf_record_write(const struct kf_record *rec, const char *path);

/* Closes the listener. */
void kf_record_close(struct kf_record *rec);

#endif
