/* tar.h: a small POSIX tar writer (ustar headers, and a pax extended header for a path that
 * does not fit ustar's 100 + 155 bytes) into a growable buffer, for candidate downloads. It
 * writes regular files and directories only, owned by uid/gid 0 ("kforge"), modes 0644 and
 * 0755. The archive is complete after kf_tar_finish (two zero blocks). */
#ifndef KF_SERVER_TAR_H
#define KF_SERVER_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Appends a regular file: path (relative, '/'-separated, no NUL) and len bytes of data, with
 * mtime in seconds since 1970. Returns 0, or -1 (out of memory, empty path, or a file of 8 GiB
 * or more), leaving out as it was. out keeps owning its storage. */
int kf_tar_add_file(struct kf_buf *out, const char *path, const void *data, size_t len,
                    int64_t mtime);

/* Appends a directory entry (path without or with its trailing '/'). Same returns. */
int kf_tar_add_dir(struct kf_buf *out, const char *path, int64_t mtime);

/* Appends the end-of-archive marker. Returns 0 or -1 (out of memory). */
int kf_tar_finish(struct kf_buf *out);

#endif
