/* expert_rows_reg.h: the cuda template of rows held in registers (expert_rows_reg.c). */
#ifndef KF_EXPERT_ROWS_REG_H
#define KF_EXPERT_ROWS_REG_H

/* CUDA source with expert_rows.c's placeholders (@IN@, @ARGS@, @T@), for inside its anonymous
 * namespace, after kf_elem, KF_LOAD and a constexpr int MODE: defines
 * rows_reg_launch(inputs.., out, outer, red) for rows of red <= KMAX * T contiguous elements. */
const char *kfx_rows_reg_tmpl(void);

#endif
