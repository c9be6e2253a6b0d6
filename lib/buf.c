/* buf.c: the growable byte buffer of buf.h. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool kf_buf_append(struct kf_buf *b, const void *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (d == NULL)
            return false;
        b->data = d;
        b->cap = cap;
    }
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

void kf_buf_keep_tail(struct kf_buf *b, size_t keep) {
    if (b->len <= keep)
        return;
    memmove(b->data, b->data + b->len - keep, keep);
    b->len = keep;
    b->data[b->len] = '\0';
}

void kf_buf_free(struct kf_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

bool kf_buf_printf(struct kf_buf *b, const char *fmt, ...) {
    char small[512];
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    bool ok = n >= 0;
    if (ok && (size_t)n < sizeof(small)) {
        ok = kf_buf_append(b, small, (size_t)n);
    } else if (ok) {
        char *big = malloc((size_t)n + 1);
        ok = big != NULL;
        if (ok) {
            vsnprintf(big, (size_t)n + 1, fmt, ap2);
            ok = kf_buf_append(b, big, (size_t)n);
            free(big);
        }
    }
    va_end(ap2);
    return ok;
}
