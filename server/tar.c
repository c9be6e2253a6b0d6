/* tar.c: the POSIX tar writer of tar.h. A member is a 512-byte ustar header, its data, and
 * zeros up to the next 512-byte block. A path longer than 100 bytes goes into ustar's
 * prefix/name split at a '/'; one that cannot be split that way gets a pax extended header
 * ('x') with a "path" record before it, which every POSIX.1-2001 reader (GNU tar, bsdtar,
 * Python's tarfile) applies. */
#include <stdio.h>
#include <string.h>

#include "tar.h"

#define BLOCK 512
#define NAME_LEN 100
#define PREFIX_LEN 155
#define MAX_SIZE 077777777777LL /* 11 octal digits */

/* Writes v in octal, zero-padded, NUL-terminated, into a field of n bytes. */
static void octal(char *field, size_t n, long long v) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%0*llo", (int)(n - 1), v < 0 ? 0 : v);
    memcpy(field, tmp, n - 1);
    field[n - 1] = '\0';
}

/* Splits path into ustar's prefix and name; false when it cannot be split. */
static bool split(const char *path, size_t len, size_t *cut) {
    if (len <= NAME_LEN) {
        *cut = 0;
        return true;
    }
    for (size_t i = 1; i < len && i <= PREFIX_LEN; i++)
        if (path[i] == '/' && len - i - 1 <= NAME_LEN && len - i - 1 > 0) {
            *cut = i;
            return true;
        }
    return false;
}

/* Fills a header for path (at most NAME_LEN + PREFIX_LEN + 1 bytes, or truncated) */
static void header(char h[BLOCK], const char *path, char type, long long size, int64_t mtime,
                   unsigned mode) {
    memset(h, 0, BLOCK);
    size_t len = strlen(path), cut = 0;
    if (split(path, len, &cut) && cut > 0) {
        memcpy(h + 345, path, cut);
        memcpy(h + 0, path + cut + 1, len - cut - 1);
    } else if (len <= NAME_LEN) {
        memcpy(h + 0, path, len);
    } else {
        memcpy(h + 0, path + len - (NAME_LEN - 1), NAME_LEN - 1); /* pax carries the path */
    }
    octal(h + 100, 8, mode);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, size);
    octal(h + 136, 12, mtime);
    h[156] = type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memcpy(h + 265, "kforge", 6);
    memcpy(h + 297, "kforge", 6);
    octal(h + 329, 8, 0);
    octal(h + 337, 8, 0);
    memset(h + 148, ' ', 8);
    unsigned long sum = 0;
    for (size_t i = 0; i < BLOCK; i++)
        sum += (unsigned char)h[i];
    char tmp[16];
    snprintf(tmp, sizeof tmp, "%06lo", sum & 0777777);
    memcpy(h + 148, tmp, 6);
    h[154] = '\0';
    h[155] = ' ';
}

/* Appends zeros after len bytes of data, up to the next block. */
static bool pad_block(struct kf_buf *out, size_t len) {
    static const char zeros[BLOCK];
    size_t pad = (BLOCK - len % BLOCK) % BLOCK;
    return pad == 0 || kf_buf_append(out, zeros, pad);
}

/* The pax "path" record for path: "LEN path=PATH\n", LEN counting itself. */
static bool pax_path(struct kf_buf *out, const char *path, int64_t mtime) {
    size_t body = strlen(" path=") + strlen(path) + 1, total = body + 1;
    for (int i = 0; i < 4; i++) { /* the length's own digits change the length */
        char d[24];
        total = body + (size_t)snprintf(d, sizeof d, "%zu", total);
    }
    char h[BLOCK];
    header(h, "PaxHeaders/path", 'x', (long long)total, mtime, 0644);
    if (!kf_buf_append(out, h, BLOCK))
        return false;
    char head[32];
    int n = snprintf(head, sizeof head, "%zu path=", total);
    size_t start = out->len;
    if (!kf_buf_append(out, head, (size_t)n) || !kf_buf_append(out, path, strlen(path)) ||
        !kf_buf_append(out, "\n", 1))
        return false;
    return pad_block(out, out->len - start);
}

static int add(struct kf_buf *out, const char *path, char type, const void *data, size_t len,
               int64_t mtime, unsigned mode) {
    size_t plen = strlen(path), cut = 0;
    if (plen == 0 || (unsigned long long)len > (unsigned long long)MAX_SIZE)
        return -1;
    size_t saved = out->len;
    bool ok = split(path, plen, &cut) || pax_path(out, path, mtime);
    char h[BLOCK];
    header(h, path, type, (long long)len, mtime, mode);
    ok = ok && kf_buf_append(out, h, BLOCK);
    if (ok && len > 0)
        ok = kf_buf_append(out, data, len) && pad_block(out, len);
    if (!ok) {
        out->len = saved;
        if (out->data)
            out->data[saved] = '\0';
        return -1;
    }
    return 0;
}

int kf_tar_add_file(struct kf_buf *out, const char *path, const void *data, size_t len,
                    int64_t mtime) {
    return add(out, path, '0', data, len, mtime, 0644);
}

int kf_tar_add_dir(struct kf_buf *out, const char *path, int64_t mtime) {
    char p[4096];
    size_t n = strlen(path);
    if (n == 0 || n + 2 > sizeof p)
        return -1;
    snprintf(p, sizeof p, "%s%s", path, path[n - 1] == '/' ? "" : "/");
    return add(out, p, '5', NULL, 0, mtime, 0755);
}

int kf_tar_finish(struct kf_buf *out) {
    static const char zeros[2 * BLOCK];
    return kf_buf_append(out, zeros, sizeof zeros) ? 0 : -1;
}
