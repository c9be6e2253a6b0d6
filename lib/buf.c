/* buf.c: the growable byte buffer of buf.h. */
#include "buf.h"

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
