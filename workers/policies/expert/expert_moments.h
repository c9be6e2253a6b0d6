/* expert_moments.h: the cuda template of the statistics kernels (expert_moments.c). */
#ifndef KF_EXPERT_MOMENTS_H
#define KF_EXPERT_MOMENTS_H

/* CUDA source with expert_rows.c's placeholders (@IN@, @ARGS@, @T@, @FN@), after kf_elem,
 * KF_LOAD, KF_MOMENTS_ADD and a constexpr int SPLIT inside the anonymous namespace: closes the
 * namespace and defines the step's entry point
 * @FN@(inputs.., mean, rstd, A, G, B, rep, eps): the mean and 1/sqrt(var + eps) of each group g
 * of the A x B elements (a * G + g) * B + b, written rep times. */
const char *kfx_moments_tmpl(void);

#endif
