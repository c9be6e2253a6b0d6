/* buf.h: a growable byte buffer, always NUL-terminated after its bytes (so text can be read as
 * a C string). Zero-initialise it ({0}); the struct owns data until kf_buf_free. */
#ifndef KF_BUF_H
#define KF_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct kf_buf {
    char *data; /* NULL until the first append */
    size_t len, cap;
};

/* Appends n bytes of p (doubling the storage, at least 4 KiB). Returns false, leaving the
 * buffer as it was, when memory ran out. */
bool kf_buf_append(struct kf_buf *b, const void *p, size_t n);

/* Appends printf-style text (without its NUL). Returns false, leaving the buffer as it was,
 * when memory ran out. */
bool kf_buf_printf(struct kf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Keeps only the last `keep` bytes. */
void kf_buf_keep_tail(struct kf_buf *b, size_t keep);

/* Frees the storage; the buffer is empty and reusable. */
void kf_buf_free(struct kf_buf *b);

#endif
