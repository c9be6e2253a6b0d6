/* expert_rnn.h: the persistent recurrent kernel, cuda variant 2 of a KFX_RNN step
 * (expert_rnn_persist.c), for expert_rnn.c. */
#ifndef KF_EXPERT_RNN_H
#define KF_EXPERT_RNN_H

#include <stdbool.h>

#include "buf.h"

/* Appends to b, inside the kernel file's anonymous namespace after its constants (kL, kD, kH,
 * kG, kBias), sig and variant 1's row_dots: kPJB, grid_barrier, the kernel persist for hidden size
 * H (an LSTM's if lstm: it keeps a cell state), whose cell is the text cell then store
 * (expert_rnn.c's, over xa, ra, n, j, hp, hs, cp, c, y, ys, hn), and persist_fits(N, &blocks,
 * &smem). */
void kfx_rnn_persist_kernel(struct kf_buf *b, long long H, bool lstm, const char *cell,
                            const char *store);

/* The launch, for inside the entry's loop over directions after the input projections: where
 * pok (persist_fits' answer, with pblocks and psmem) it runs every step and continues. */
const char *kfx_rnn_persist_launch(void);

#endif
