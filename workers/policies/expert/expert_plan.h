/* expert_plan.h: the expert's plan of a task: the FX graph of `inspect` partitioned into kernels
 * (steps), run one after the other by a generated model_new.py.
 *
 * Elementwise operations are lazy: they stay C expressions over the tensors that feed them and
 * are fused into one pass when something needs their value in memory (an operator that is not
 * elementwise, or the output). An operator that reduces (sums, arg-reductions, softmax, the
 * statistics of a norm) also takes the lazy chain before it as a prologue when that chain's
 * inputs have its input's shape. Norms become a statistics kernel and a lazy elementwise
 * normalisation, so whatever follows them (an activation, a residual) fuses into that pass. */
#ifndef KF_EXPERT_PLAN_H
#define KF_EXPERT_PLAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct kf_buf;

#define KFX_MAX_VALS 4096
#define KFX_MAX_STEPS 512
#define KFX_MAX_LEAVES 12
#define KFX_MAX_DIMS 8
#define KFX_MAX_SUB 4
#define KFX_MAX_CAT 64 /* a DenseNet block cats up to 49 (DenseNet201) */

enum kfx_vkind {
    KFX_INPUT,  /* a forward() argument: x0, x1.. */
    KFX_PARAM,  /* a parameter or buffer, or a view of one */
    KFX_TENSOR, /* the output of a step */
    KFX_LAZY,   /* an elementwise expression not yet in memory */
    KFX_TUPLE,  /* (values, indices) of torch.max/min over a dim, until getitem picks one */
    KFX_SIZE,   /* a Python int (x.shape[d], ndim 0) or shape (x.shape, ndim 1) of a tensor:
                   read by views, never by a kernel (is_int is set) */
    KFX_DEVICE, /* x.device: read only by torch.tensor(number, device=..) (expert_plan_const.c) */
};

/* One value of the graph (a node's result, or a view the plan made). */
struct kfx_val {
    enum kfx_vkind kind;
    char py[128]; /* materialised kinds: the Python expression of the tensor */
    char *expr;   /* lazy: a C expression of float over vN (N: val indices); owned */
    int ndim;
    long long shape[KFX_MAX_DIMS]; /* the graph's shape (from the reference's run) */
    int is_int;                    /* int64 (arg-reductions): cannot feed elementwise code */
    bool held_float;    /* of an integer dtype, held as float32 values (torch.arange, its views) */
    const json_t *node; /* tuple: the max/min node that getitem resolves; borrowed */
    int view_of;        /* a view (expert_plan_view.c): 1 + the val it views at its root, else 0 */
    bool noncontig;     /* a transposed or permuted view: read through its strides only (a kernel
                           that wants it contiguous gets a copy, kfx_materialise) */
    int as_tensor;      /* a KFX_SIZE scalar read by elementwise code: 1 + its 0-d tensor's val */
    bool offset;        /* a strided view that may start past its root's first element (a slice) */
    int diag;     /* torch.diag(v) of a vector v, held as v viewed as a column (1: a matmul's a) or
                     a row (2: its b); only a matmul reads it (expert_plan_diag.c); else 0 */
    int flipped;  /* 1 + the dim along which this val's tensor holds its value reversed: only
                     the inside of a reverse scan, flip(cumsum(flip(x, d), d), d)
                     (expert_plan_flip.c); else 0 */
    int last2_of; /* 1 + the contiguous val this view is with its last two dims swapped (x.mT,
                     x.transpose(-2, -1)): a matmul reads it as is, op = transpose; else 0 */
    int items;    /* a tuple whose n_items items are vals in memory (a recurrent layer's): 1 +
                     the val of its first item, the others following it; else 0 */
    int n_items;
};

enum kfx_skind {
    KFX_EW,
    KFX_REDUCE,
    KFX_SOFTMAX,
    KFX_MOMENTS,
    KFX_GEMM,
    KFX_CONV,
    KFX_POOL,
    KFX_SCAN,
    KFX_MULTI,  /* sibling reductions of one input and geometry in one kernel (expert_multi.c) */
    KFX_CAST,   /* a boolean or integer input read into float32 (expert_cast.c) */
    KFX_XENT,   /* cross entropy of logits and int64 class indices (expert_xent.c) */
    KFX_CAT,    /* torch.cat of contiguous tensors along a dim (expert_cat.c) */
    KFX_MASK,   /* a tril or triu mask, or a filled tensor, made once per shape (expert_tri.c) */
    KFX_EMBED,  /* the rows of an embedding's weight that int64 indices name (expert_embed.c) */
    KFX_GATHER, /* each output element read from the input through a rule per dim: padding,
                   interpolation, pixel shuffle, flip, adaptive pools (expert_gather.c) */
    KFX_RNN,    /* nn.LSTM, GRU, RNN: every layer, direction and step (expert_rnn.c) */
    KFX_NKINDS  /* the count of kinds (the tables of their names are checked against it) */
};

/* One reduction of a KFX_MULTI step: its operator (sum, mean, prod, var0/1, std0/1), its
 * prologue body over its own leaves in0..in<n - 1>, which are the step's leaves map[0..n). */
struct kfx_sub {
    char op[16];
    char *body; /* owned */
    int n;
    int map[KFX_MAX_LEAVES];
};

/* One kernel of the plan: kernels/kf_op<index>.{cu,cpp}, defining extern "C" kf_op<index>. */
struct kfx_step {
    enum kfx_skind kind;
    char fn[16];
    /* elementwise (KFX_EW) and the prologue of reductions: a body in expert_ew.c's format
     * (`const float vN = ...;` reading in0[i]..., ending `out[i] = vK;`) over n_leaves inputs */
    char *body; /* owned */
    int n_leaves;
    int bcast; /* EW: the leaves broadcast to the output (expert_bcast.c's kernels) */
    /* reductions: the operator ("sum", "mean", "amax", "amin", "argmax", "argmin",
     * "logsumexp", "softmax", "log_softmax", "moments") */
    char op[16];
    const json_t *node; /* GEMM, CONV, POOL: the node for expert_ops.h; borrowed */
    char ins[4][128];   /* GEMM, CONV, POOL: Python expressions of the operands */
    int n_ins;
    bool trans_b; /* GEMM: kfx_call's trans_b and trans_a */
    bool trans_a;
    int n_variants; /* counted when planned */
    bool reverse;   /* SCAN: from the end of the dim to its start (expert_plan_flip.c) */
    /* MOMENTS of contiguous groups (layer norm), or a sum or mean over the last dimension (an
     * RMS norm's mean of squares), on cuda: the elementwise pass that follows (its output of
     * the statistics' input shape) fused into the same kernel, which computes a group's
     * statistics and then writes that group's outputs while its input is in cache
     * (expert_norm_fused.c). ew_* are set by kfx_fuse_norm; the statistics step sets the rest
     * when it may fuse. */
    char *ew_body; /* owned; NULL when not fused */
    int ew_leaves;
    signed char ew_stat[KFX_MAX_LEAVES]; /* leaf k: 0 a tensor, 1 the mean, 2 the second */
    /* pass leaf k: 1 + the statistics' input inJ that it is (held raw in registers by the
     * row kernel, not read again); all 0 unless every statistics input is a pass leaf */
    unsigned char ew_held[KFX_MAX_LEAVES];
    int pro_val[KFX_MAX_LEAVES]; /* kfx_prologue: the vals of its tensors in0.. (n_leaves) */
    /* kfx_prologue: leaf k holds one value (a scale from sizes, a 0-d or [1, 1] parameter, a whole
     * tensor's reduction), read as inK[0] for every element; the leaves of the input's shape
     * come first (in0 gives the geometry) */
    unsigned char pro_scalar[KFX_MAX_LEAVES];
    /* kfx_prologue: leaf k broadcasts to the input along one run of its dimensions (a conv's
     * per-channel bias, a linear layer's bias, a per-row target): element j reads its element
     * (j / qK) % mK, with qK and mK passed after its pointer (the model's _bqm) */
    unsigned char pro_bcast[KFX_MAX_LEAVES];
    int fusable;                 /* the statistics may take a pass */
    int stat_in, stat_m, stat_r; /* vals: the input, the mean and the second (-1: none) */
    /* MOMENTS: the second statistic, 0 a norm's 1/sqrt(var + eps), 1 the variance and 2 the
     * standard deviation with Bessel's correction corr (a mean and a var or std of one input
     * over the last dimension: expert_plan_multi.c); the kernels' kf_second (expert_rows.c) */
    int second, corr;
    size_t launch_at, launch_len; /* the statistics' launch line in fwd */
    /* REDUCE: its input val, dims (Python text), keepdim and output val, for a sibling
     * reduction that may join it (expert_plan_multi.c) */
    int red_in, red_out;
    char red_dims[128];
    bool red_keep;
    /* MULTI: n_sub reductions over the step's leaves (n_leaves, pro_val, pro_scalar); the
     * outputs are the vals sub_out[] */
    int n_sub;
    struct kfx_sub sub[KFX_MAX_SUB];
    int sub_out[KFX_MAX_SUB];
    /* CONV: the val of its output tensor (before the bias). On cuda the elementwise pass that
     * reads it may join the step as its epilogue (kfx_fuse_conv): ew_body over ew_leaves
     * leaves, leaf 0 the convolution's value, leaf k > 0 read as pro_scalar and pro_bcast say */
    int conv_out;
    int diag;          /* MASK: the diagonal (op "tril", "triu" or "eye") */
    double fill, step; /* MASK: op "full"'s value; "arange"'s start and step */
    /* GATHER: the output, contiguous, seen as g_nd dims of extents g_out; its coordinate o
     * along dim d reads the input (contiguous, g_numel elements) at coordinate rule_d(o) of
     * extent g_n[d] and stride g_stride[d]; g_lo, g_scale: the rule's offset and scale (enum
     * kfx_grule); op "avg" or "max" for windows, g_fill for a constant pad's outside */
    int g_nd;
    long long g_out[KFX_MAX_DIMS], g_n[KFX_MAX_DIMS], g_stride[KFX_MAX_DIMS], g_lo[KFX_MAX_DIMS];
    unsigned char g_rule[KFX_MAX_DIMS];
    double g_scale[KFX_MAX_DIMS];
    double g_fill;
    long long g_numel;
};

/* How a KFX_GATHER step's output coordinate o along a dim reads the input (extent n). */
enum kfx_grule {
    KFX_G_SAME,          /* o */
    KFX_G_CONST,         /* o - lo, the fill outside [0, n) (a constant pad, or a crop) */
    KFX_G_REFLECT,       /* o - lo reflected at both ends, the edge not repeated */
    KFX_G_REPLICATE,     /* o - lo clamped to [0, n) */
    KFX_G_CIRCULAR,      /* o - lo modulo n */
    KFX_G_FLIP,          /* n - 1 - o */
    KFX_G_NEAREST,       /* min(floor(o * scale), n - 1), in float as PyTorch computes it */
    KFX_G_NEAREST_EXACT, /* min(floor((o + 0.5) * scale), n - 1) */
    KFX_G_LINEAR,        /* two taps around (o + 0.5) * scale - 0.5 (lo 0), or o * scale (lo 1:
                            align_corners), weighted */
    KFX_G_WINDOW,        /* [floor(o * n / out), ceil((o + 1) * n / out)): an adaptive pool's */
    KFX_G_MOD,           /* o modulo n: a repeat or tile */
    KFX_G_DIV,           /* o / lo: a repeat_interleave by lo */
    KFX_G_INDEX,         /* ix[the output element's flat index]: torch.gather's index, an int64
                            tensor of the output's shape (NaN where it falls outside [0, n)) */
};

struct kfx_plan {
    char backend[8];
    struct kfx_val val[KFX_MAX_VALS];
    int n_vals;
    struct kfx_step step[KFX_MAX_STEPS];
    int n_steps;
    int n_inputs;
    char like[16]; /* the first tensor input's name (x0..): what a 0-d constant's device follows */
    struct kf_buf *fwd; /* the body of forward(), Python lines indented 8 spaces; owned */
    /* owned: a copy of the graph the plan was built from, whose nodes the steps point into
     * (kfx_step_src reads them at every variant): the verdict it came in is released when the
     * next verdict arrives, long before the expert writes its last kernel */
    json_t *graph;
    /* the step outputs that forward() returns or returns a view of, space-separated */
    char ret_roots[256];
    int at_node; /* the index of the graph node being planned (the nodes from it on are to come) */
};

/* Plans the task whose inspect graph is g for backend "cuda" or "cpu". 0, or -1 with the
 * operator or shape that is not supported in detail. The plan keeps a copy of g (the caller
 * may release g at once); kfx_plan_free releases it, on failure too. */
int kfx_plan_build(struct kfx_plan *p, const json_t *g, const char *backend, char *detail,
                   size_t dlen);
void kfx_plan_free(struct kfx_plan *p);

/* The complete model_new.py (owned). */
char *kfx_plan_model(const struct kfx_plan *p);

/* expert_replay.c: the Python helpers of model_new.py through which forward's calls are
 * recorded once and then replayed (_forward; a static text). */
const char *kfx_replay_helpers(void);

/* The source (owned) of step s's kernel file in variant v; NULL when v is past its last. */
char *kfx_step_src(const struct kfx_plan *p, int s, int v);

/* "kernels/kf_op3.cu" for step s, into out. */
void kfx_step_path(const struct kfx_plan *p, int s, char *out, size_t n);

/* expert_plan_node.c: the planner's handling of one node that is not elementwise (reductions,
 * softmax, norms, matmuls, convolutions, pooling). 1 when it handled the node (val k is set),
 * 0 when the node is not one of those, -1 with detail when it is but cannot be done. */
int kfx_plan_anchor(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);

/* expert_plan_node.c, for expert_plan_loss.c: */
/* A reduction step over val in with operator op (dims dim, None for all) whose output is val k
 * (of the node's output shape). 1, or -1 with detail. */
int kfx_reduce(struct kfx_plan *p, const json_t *node, int k, int in, const char *op,
               const json_t *dim, bool keepdim, char *detail, size_t dlen);
/* A new val (not a node of the graph) for a step's output, which kfx_reduce sets: its index,
 * or -1 when the plan has no room. */
int kfx_new_out(struct kfx_plan *p);
/* A new lazy val of like's shape computing expr (not a node of the graph): its index, or -1. */
int kfx_new_lazy(struct kfx_plan *p, int like, const char *expr);

/* expert_plan_view.c: Python scalars from sizes (math.sqrt(x.size(-1)), x.shape[1] * 2): a
 * node whose operands are sizes and numbers becomes a KFX_SIZE scalar. 1 handled, 0 not. */
int kfx_plan_scalar(struct kfx_plan *p, const json_t *node, int k);

/* expert_plan_view.c: views of a tensor (view, reshape, flatten, squeeze, unsqueeze), sizes,
 * slices, chunk and split (a tuple of pieces), glu, and dropout that drops nothing. 1
 * handled, 0 none of them, -1 with detail. */
int kfx_plan_view(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);
/* expert_plan_view.c: piece i of tuple val t when t is a chunk or a split (a view of its
 * input): val k. 1, 0 when t is another tuple, -1 with detail. */
int kfx_plan_piece(struct kfx_plan *p, const json_t *node, int k, int t, long long i, char *detail,
                   size_t dlen);

/* expert_plan_loss.c: the losses (mse, l1, smooth_l1, huber, kl_div, triplet margin), the
 * distances and similarities, planned as an elementwise chain and reductions, and cross
 * entropy (a KFX_XENT step). 1 handled, 0 not one of them, -1 with detail. */
int kfx_plan_loss(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                  size_t dlen);

/* expert_plan_flip.c: torch.flip as the two ends of a reverse scan (the scan in between runs
 * backwards: kfx_step.reverse). 1 handled, 0 not a flip or a flip of its own (a gather), -1
 * with detail. */
int kfx_plan_flip(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);

/* expert_plan_diag.c: torch.diag of a vector as a matmul's operand: the product is the other
 * operand scaled by rows (diag(v) @ b) or columns (b @ diag(v)), an elementwise chain.
 * kfx_plan_diag: the diag node; kfx_plan_diag_product: a matmul node, 0 when neither operand
 * is such a diag. 1 handled, 0 not, -1 with detail. */
int kfx_plan_diag(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);
int kfx_plan_diag_product(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);

/* expert_plan.c, for expert_plan_node.c: */
/* The val of argument a (a {"node": NAME} object), or -1. */
int kfx_arg_val(const struct kfx_plan *p, const json_t *a);
/* An int argument: a literal, or a size (a KFX_SIZE val) whose number inspect kept from the
 * traced run ("value"); false for anything else. For what a kernel bakes in: a plan holds for
 * the traced shapes. */
bool kfx_int(const struct kfx_plan *p, const json_t *a, long long *out);
/* A node's argument: args[i], else kwargs[name] (name may be NULL), else NULL. */
const json_t *kfx_node_arg(const json_t *node, size_t i, const char *name);
/* The one node of the graph that uses node's result (the output node counts), or NULL when
 * none or several do. */
const json_t *kfx_sole_user(const struct kfx_plan *p, const json_t *node);
/* Whether no node of the graph (the output node included) uses node's result. */
bool kfx_unused(const struct kfx_plan *p, const json_t *node);
/* The val that lazy val v is as it is ("vJ": an identity such as dropout that drops nothing,
 * x.to(device), x.contiguous()), or -1. */
int kfx_identity_of(const struct kfx_plan *p, int v);
/* Makes val v usable as a kernel operand: a lazy one is computed by a new EW step. 0 or -1. */
int kfx_materialise(struct kfx_plan *p, int v, char *detail, size_t dlen);
/* A new step of kind kind with its function name set; NULL (detail set) when there are too
 * many. */
struct kfx_step *kfx_add_step(struct kfx_plan *p, enum kfx_skind kind, char *detail, size_t dlen);
/* The prologue of a reduction over val v: its lazy chain when every input of the chain has
 * v's shape, else v itself (materialised). Sets st->body, st->n_leaves and the Python names of
 * the leaves, comma-separated with a trailing ", ", into leaves. 0 or -1. */
int kfx_prologue(struct kfx_plan *p, int v, struct kfx_step *st, char *leaves, size_t n,
                 char *detail, size_t dlen);
/* Sets val k from the node's output shape and dtype, with kind and Python expression. */
void kfx_set_val(struct kfx_plan *p, int k, const json_t *node, enum kfx_vkind kind,
                 const char *py);
/* A lazy val k whose expression is expr (copied). */
int kfx_set_lazy(struct kfx_plan *p, int k, const json_t *node, const char *expr);
/* A new val (not a node's) that is a materialised tensor of the given shape; its index or -1. */
int kfx_new_val(struct kfx_plan *p, const char *py, const long long *shape, int ndim);
/* Appends to forward() "local = self._modules[...]._parameters[leaf]" (or _buffers) for the
 * module's tensor at its dotted name: a dictionary walk, where get_parameter costs about 2.5 us
 * a call on the host and the judge's timer runs from the call. */
void kfx_bind_param(struct kfx_plan *p, const char *local, const char *dotted, bool buffer);
/* Appends a formatted line of forward() (8 spaces are added). */
void kfx_line(struct kfx_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* expert_rows.c: kernels of the reductions (KFX_REDUCE, KFX_SOFTMAX, KFX_MOMENTS). */
char *kfx_rows_src(const struct kfx_step *st, const char *backend, int v);
/* expert_rows.c, for the kernels that read a prologue (expert_scan.c too): appends tmpl with
 * @IN@ (the leaves' parameters), @ARGS@ (their names), @FN@ and @T@ (threads) replaced; and the
 * KF_LOAD(idx) macro of st's prologue (cuda: also KF_LOAD4 and KF_ALIGNED). */
void kfx_rows_put(struct kf_buf *b, const char *tmpl, const struct kfx_step *st, int threads);
void kfx_rows_load(struct kf_buf *b, const struct kfx_step *st, bool cuda);
/* expert_rows.c: kf_bix(j, q, m), element j's index (j / q) % m in a leaf that broadcasts along
 * one run of dims, in 32 bits where the operands fit (host and device code). */
void kfx_src_bix(struct kf_buf *b);
/* expert_rows_cpu.c: the exported cpu kernel of reduction or softmax step st (op: its operator,
 * "softmax" for both softmaxes but log_softmax), after kf_elem, KF_LOAD, Acc, OutT and SCHED;
 * kfx_rows_cpu_exp: whether op's kernel calls kf_expf. */
void kfx_rows_cpu_kernel(struct kf_buf *b, const struct kfx_step *st, const char *op);
bool kfx_rows_cpu_exp(const char *op);

/* expert_plan_multi.c: when the last step is a sum-like reduction (sum, mean, prod, var, std)
 * of an input of in's shape over the same dims and keepdim, which op (also sum-like) over in
 * does not read, the new reduction joins it (the step becomes KFX_MULTI) and writes val k
 * (set here, from node). 1 when it joined, 0 when it does not apply, -1 with detail. */
int kfx_multi_join(struct kfx_plan *p, const json_t *node, int k, int in, const char *op,
                   const char *dims, bool keepdim, char *detail, size_t dlen);

/* expert_multi.c: the kernels of a KFX_MULTI step. */
char *kfx_multi_src(const struct kfx_step *st, const char *backend, int v);

/* expert_cast.c: KFX_CAST. kfx_plan_cast turns input val k (a placeholder of dtype dtype:
 * bool, int64 or int32) into a float32 tensor of its shape made by a conversion step, 0; or
 * -1 with detail for any other dtype. kfx_cast_ctype: dtype's C element type, or NULL. */
int kfx_plan_cast(struct kfx_plan *p, int k, const char *dtype, char *detail, size_t dlen);

/* expert_plan_const.c. kfx_plan_attribute: a get_attr node k, a parameter or buffer of the
 * module, or a 0-d tensor constant whose value inspect kept (a float literal); 0, or -1 with
 * detail. kfx_plan_const: getattr(x, "device") and torch.tensor(number, ..) as node k; 1
 * handled, 0 not such a node, -1 with detail. */
int kfx_plan_attribute(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);
int kfx_plan_const(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);
/* An infinite Python float as inspect writes it ({"float": "inf"} or "-inf", JSON having no
 * infinity): true, and its C literal in out; false for anything else. */
bool kfx_infinity(const json_t *v, char *out, size_t n);
/* x.float(), x.to(torch.float32), x.type(torch.float32) as node k: 1 handled (the same value,
 * or a KFX_CAST step of an integer result), 0 not such a node, -1 with detail. */
int kfx_plan_to_float32(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);
const char *kfx_cast_ctype(const char *dtype);
char *kfx_cast_src(const struct kfx_step *st, const char *backend, int v);

/* expert_xent.c: the kernels of KFX_XENT, which expert_plan_loss.c plans; kfx_is_xent
 * (expert_plan_loss.c): whether node is a cross entropy (its int64 target input is then read
 * as it is, not converted). */
bool kfx_is_xent(const json_t *node);
char *kfx_xent_src(const struct kfx_step *st, const char *backend, int v);

/* expert_cat.c: KFX_CAT. kfx_plan_cat plans a cat node (s its short name): 1, 0 when it is
 * not one, -1 with detail. */
int kfx_plan_cat(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                 size_t dlen);
char *kfx_cat_src(const struct kfx_step *st, const char *backend, int v);

/* expert_plan_einsum.c: an einsum node (s its short name) that is a matrix product, planned as
 * the matmul it is: 1, 0 when it is not an einsum, -1 with detail (the equation). */
int kfx_plan_einsum(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                    size_t dlen);
/* expert_plan_contract.c: einsum node (val k) of equation text over the operands ops (a list of
 * node arguments), contracted a pair at a time as matmuls and broadcast products: 1, or -1 with
 * detail (the equation). */
int kfx_plan_contract(struct kfx_plan *p, const json_t *node, int k, const char *text,
                      const json_t *ops, char *detail, size_t dlen);
/* A node {"name", "op": "call_function", "target", "args", "kwargs": {}, "output"} that no FX
 * graph has, appended to the plan's graph copy (which owns it and keeps it in its "kfx_einsum"
 * list): an operator written as others (an einsum as a matmul). NULL when memory ran out. */
json_t *kfx_plan_synth(struct kfx_plan *p, const char *name, const char *target, json_t *args,
                       json_t *output);
/* A new val planned from synthetic node t (kfx_plan_anchor): its index, or -1. */
int kfx_plan_synth_val(struct kfx_plan *p, json_t *t, char *detail, size_t dlen);
/* {"node": the name of val v's node} (new), a synthetic node's argument; NULL when v has none. */
json_t *kfx_synth_ref(const struct kfx_plan *p, int v);
/* A val planned from the synthetic node name@tag of target over args and output meta out (both
 * owned, either NULL: -1): its index, or -1. */
int kfx_synth_tagged(struct kfx_plan *p, const char *name, const char *tag, const char *target,
                     json_t *args, json_t *out, char *detail, size_t dlen);

/* expert_plan_rewrite.c: torch.addmm and baddbmm (beta * input + alpha * a @ b: the matmul a
 * synthetic node, the rest lazy), torch.outer and ger (a[:, None] * b) and torch.roll (a cat of
 * two slices): 1, 0 when node is none of them, -1 with detail. */
int kfx_plan_rewrite(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                     size_t dlen);

/* expert_tri.c: KFX_MASK. kfx_plan_tri plans a tril or triu node (s its short name) as a
 * select against a mask that a KFX_MASK step makes: 1, 0 when it is not one, -1 with detail. */
int kfx_plan_tri(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                 size_t dlen);
/* torch.ones, zeros, full and eye made in forward() (and x.new_ones, new_zeros, new_full), of
 * float32 or bool, and torch.arange: a KFX_MASK step fills the tensor once per shape and device. 1,
 * 0 when node is none of them, -1 with detail. */
int kfx_plan_fill(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                  size_t dlen);
/* torch.arange node's start and step (its end given by its output's length): false when they are
 * not numbers or sizes, or the output not float32 or int64 of one dim. */
bool kfx_arange_args(const struct kfx_plan *p, const json_t *node, double *start, double *step);
/* Val k (node's): the view py (Python text) of val v, read through its strides: 1. */
int kfx_view_as(struct kfx_plan *p, const json_t *node, int k, int v, const char *py);
/* The rows x cols mask of op ("tril" or "triu") at diagonal diag, made by a new KFX_MASK step
 * (named after val k): the mask's val (1.0f kept, 0.0f not), or -1 with detail. */
int kfx_tri_mask(struct kfx_plan *p, int k, const char *op, long long rows, long long cols,
                 long long diag, char *detail, size_t dlen);
char *kfx_mask_src(const struct kfx_step *st, const char *backend, int v);

/* expert_plan_mha.c: item `item` of the tuple val t that an nn.MultiheadAttention node returns,
 * read by getitem node (val k): the output as self-attention (in-projection, heads, scaled dot
 * product attention, out-projection). 1, or -1 with detail (the weights, masks, other forms). */
int kfx_plan_mha(struct kfx_plan *p, const json_t *node, int k, int t, long long item, char *detail,
                 size_t dlen);

/* expert_plan_attention.c: F.scaled_dot_product_attention planned as what it computes: the
 * scores (a matmul with the keys transposed), scaled, masked (is_causal: a tril mask; a bool or
 * float attn_mask), a softmax over the keys and the product with the values. 1 handled, 0 not
 * such a node, -1 with detail. */
int kfx_plan_sdpa(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                  size_t dlen);

/* expert_plan_gather.c: F.pad and the padding modules (constant, reflect, replicate,
 * circular), F.interpolate and nn.Upsample (nearest, nearest-exact, linear, bilinear,
 * trilinear, area), pixel shuffle and unshuffle, torch.flip, adaptive pools to sizes other
 * than 1, repeat, tile and repeat_interleave: a KFX_GATHER step. s: the node's short name, or its
 * module type. 1 handled, 0 none of them, -1 with detail. */
int kfx_plan_gather(struct kfx_plan *p, const json_t *node, int k, const char *s, char *detail,
                    size_t dlen);
/* expert_plan_gather.c, for kfx_materialise: whether val v is a strided view (of a root in
 * memory, from its first element, its strides recorded) whose dims fold into more than 4, and
 * the gather that copies such a view: v becomes the contiguous copy. 0, or -1 with detail. */
bool kfx_gather_wants(const struct kfx_plan *p, int v);
int kfx_gather_copy(struct kfx_plan *p, int v, char *detail, size_t dlen);
/* expert_gather.c: the kernels of a KFX_GATHER step. */
char *kfx_gather_src(const struct kfx_step *st, const char *backend, int v);

/* expert_embed.c: KFX_EMBED. kfx_is_embedding: whether node is nn.Embedding or F.embedding (its
 * int64 input of indices is then read as it is); kfx_plan_embedding plans it, weight the val
 * of its weight: 1, or -1 with detail. */
bool kfx_is_embedding(const json_t *node);
int kfx_plan_embedding(struct kfx_plan *p, const json_t *node, int k, int weight, char *detail,
                       size_t dlen);
/* x[idx] of a float tensor by an int64 input or buffer (getitem node, val k): the rows of x as
 * [V, D], a KFX_EMBED step. 1, 0 when the index is not an integer tensor, -1 with detail. */
int kfx_plan_index_rows(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);
char *kfx_embed_src(const struct kfx_step *st, const char *backend, int v);

/* expert_plan_rnn.c: kfx_is_rnn: whether node calls an nn.LSTM, GRU or RNN. kfx_plan_rnn plans
 * it as a KFX_RNN step whose outputs are the items of tuple val k: 1, or -1 with detail.
 * kfx_plan_rnn_item: item i of such a tuple t (or of an LSTM's (h_n, c_n)) as val k (getitem
 * node): 1, or -1 with detail. */
bool kfx_is_rnn(const json_t *node);
int kfx_plan_rnn(struct kfx_plan *p, const json_t *node, int k, char *detail, size_t dlen);
int kfx_plan_rnn_item(struct kfx_plan *p, const json_t *node, int k, int t, long long i,
                      char *detail, size_t dlen);
/* expert_rnn.c: the kernels of a KFX_RNN step; kfx_rnn_spec_of reads the module's options (0,
 * or -1 for a mode it does not know or a size that is not positive). */
struct kfx_rnn_spec {
    long long L, D, H, I, G; /* layers, directions, hidden and input sizes, gates */
    bool bf, bias;           /* batch_first, biases */
    bool cell;               /* nn.LSTMCell, GRUCell, RNNCell: one step of one layer */
    int mode;                /* 0 LSTM, 1 GRU, 2 RNN tanh, 3 RNN relu */
};
int kfx_rnn_spec_of(const json_t *node, struct kfx_rnn_spec *r);
char *kfx_rnn_src(const struct kfx_step *st, const char *backend, int v);

/* expert_scan.c: kernels of the scans (KFX_SCAN: cumsum, cumprod) along a dimension. */
char *kfx_scan_src(const struct kfx_step *st, const char *backend, int v);

/* expert_norm_fused.c: for a MOMENTS step with ew_body set, the cuda code that follows the
 * statistics' kf_elem and KF_LOAD (inside expert_rows.c's anonymous namespace): the fused
 * kernel and the extern "C" launcher, with expert_rows.c's placeholders (@IN@, @ARGS@, @FN@,
 * @T@) left for it to fill. reg > 0: groups that are one row of a multiple of 4 elements, at
 * most 8192 float4, are held in registers, about reg float4 per thread (0: never). Owned; NULL
 * when memory ran out. */
char *kfx_norm_fused_tmpl(const struct kfx_step *st, int reg);

/* expert_norm_fused.c: the fused kernel's extern "C" signature and opening brace, into b: the
 * statistics' parameters (mode 0, a norm's: inputs, mean, rstd, A, G, B, rep, eps; else a
 * reduction's: inputs, its output, outer, red, inner, with mean, rstd, A, rep and eps then
 * defined from them) followed by the pass's (its leaves e0.., out, n, d1, d2, d3, s00..). */
void kfx_norm_fused_open(struct kf_buf *b, const struct kfx_step *st, int mode);

/* expert_norm_fused_cpu.c: kfx_norm_fused_tmpl's cpu counterpart, the same signature and
 * placeholders, following expert_rows.c's cpu kf_elem, KF_LOAD, kf_second and SCHED (inside
 * its anonymous namespace, which it closes). Owned; NULL when memory ran out. */
char *kfx_norm_fused_cpu(const struct kfx_step *st);

/* expert_plan_fuse.c: when the last step is a fusable MOMENTS or REDUCE step whose statistics
 * the lazy
 * val v (body: its elementwise body over leaves leaf[0..n), named in names) reads, at the
 * statistics' input shape: fuses v's pass into that step, which takes body (owned), and returns
 * true; false, body still the caller's, when it does not apply. */
bool kfx_fuse_norm(struct kfx_plan *p, int v, const int *leaf, int n, char *body,
                   const char *names);

/* expert_plan_fuse.c, on cuda: when the last step is a convolution whose output only lazy val v
 * (its chain's leaves leaf[0..n)) reads, and nothing planned later reads that output, v's pass
 * can be the convolution's epilogue: the leaves are reordered (the output first) with their
 * kinds set in kind (0 of v's shape, 1 one value, 2 broadcast along a run of dims), and the
 * step's index is returned; -1 when it does not apply. kfx_fuse_conv_emit then makes the step
 * take body (v's pass over the reordered leaves, owned) and moves its launch after v's
 * allocation, with the leaves (names, each broadcast one's (q, m) after it) and v passed. */
int kfx_fuse_conv(struct kfx_plan *p, int v, int *leaf, int n, unsigned char *kind);
int kfx_fuse_conv_emit(struct kfx_plan *p, int s, int v, const int *leaf, int n,
                       const unsigned char *kind, char *body);
/* expert_plan.c: how leaf l of a chain is read at v's flat index j: 0 as l[j] (v's shape), 1 as
 * l[0] (one value), 2 as l[(j / q) % m] (a broadcast along one run of v's dims); -1 otherwise
 * (a strided view, or another broadcast). */
int kfx_leaf_kind(const struct kfx_plan *p, int l, int v);
/* expert_plan.c: whether val u is val t, a view of it, or a lazy chain that reads either. */
bool kfx_reads_val(const struct kfx_plan *p, int u, int t);

/* Whether any of st's prologue leaves broadcasts (pro_bcast): such a step's kernels read its
 * leaves through KF_LOAD and KF_LOAD4 only, so it neither merges with a sibling reduction nor
 * takes a norm's pass. */
bool kfx_step_bcast(const struct kfx_step *st);

/* expert_plan.c: the two vals have the same shape, and both are contiguous (a strided view's
 * elements are not where a flat index says). */
bool kfx_same_shape(const struct kfx_val *a, const struct kfx_val *b);

#endif
