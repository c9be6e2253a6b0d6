/* record.c: writes down the syscalls a command makes outside its allow-list (record mode). */
#include "record.h"

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "seccomp_filter.h"

void kf_record_init(struct kf_record *rec) {
    rec->listener = -1;
    rec->n = 0;
}

int kf_record_take_listener(struct kf_record *rec, int sock) {
    char byte;
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) <= 0)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    if (c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        return -1;
    memcpy(&rec->listener, CMSG_DATA(c), sizeof(int));
    return 0;
}

static void note(struct kf_record *rec, int nr, bool has_arg, uint64_t arg0) {
    for (size_t i = 0; i < rec->n; i++) {
        struct kf_record_entry *e = &rec->entries[i];
        if (e->nr == nr && e->has_arg == has_arg && e->arg0 == arg0) {
            e->count++;
            return;
        }
    }
    if (rec->n < KF_RECORD_MAX)
        rec->entries[rec->n++] = (struct kf_record_entry){nr, has_arg, arg0, 1};
}

int kf_record_handle(struct kf_record *rec) {
    struct seccomp_notif *req = NULL;
    struct seccomp_notif_resp *resp = NULL;
    if (seccomp_notify_alloc(&req, &resp) != 0)
        return -1;
    int rc = -1;
    if (seccomp_notify_receive(rec->listener, req) == 0) {
        bool has_arg = kf_seccomp_arg_checked(req->data.nr);
        note(rec, req->data.nr, has_arg, has_arg ? req->data.args[0] : 0);
        resp->id = req->id;
        resp->val = 0;
        resp->error = 0;
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        (void)seccomp_notify_respond(rec->listener, resp); /* ENOENT: the caller died */
        rc = 0;
    }
    seccomp_notify_free(req, resp);
    return rc;
}

struct line {
    char text[96];
    uint64_t count;
};

static int cmp_line(const void *a, const void *b) {
    return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

int kf_record_write(const struct kf_record *rec, const char *path) {
    struct line *lines = calloc(rec->n + 1, sizeof(*lines));
    if (lines == NULL)
        return -1;
    for (size_t i = 0; i < rec->n; i++) {
        const struct kf_record_entry *e = &rec->entries[i];
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, e->nr);
        if (e->has_arg)
            snprintf(lines[i].text, sizeof(lines[i].text), "%s/%#llx", name ? name : "?",
                     (unsigned long long)e->arg0);
        else if (name != NULL)
            snprintf(lines[i].text, sizeof(lines[i].text), "%s", name);
        else
            snprintf(lines[i].text, sizeof(lines[i].text), "syscall_%d %d", e->nr, e->nr);
        free(name);
        lines[i].count = e->count;
    }
    qsort(lines, rec->n, sizeof(*lines), cmp_line);
    FILE *f = fopen(path, "we");
    if (f == NULL) {
        free(lines);
        return -1;
    }
    for (size_t i = 0; i < rec->n; i++)
        fprintf(f, "%s\t%llu\n", lines[i].text, (unsigned long long)lines[i].count);
    free(lines);
    return fclose(f) == 0 ? 0 : -1;
}

void kf_record_close(struct kf_record *rec) {
    if (rec->listener >= 0)
        close(rec->listener);
    rec->listener = -1;
}
