/* The op table: one row per op modelc knows, one column per fact the
 * passes need (QBE's ops.h, ggml's op enum). A node's op is compared by
 * its id (mc_node.id, MC_OP_<Name>); op names are compared only where ONNX
 * is read (import) and in the registry. Included by modelc.h.
 *
 * Columns:
 *   name   the ONNX op_type (default domain), or an internal op's name
 *   facts  MC_OF_* flags:
 *     PW     pointwise: each output element is computed from the input
 *            elements at the same (broadcast) index, so the lowering gives
 *            one element (mc_lowering.pointwise), fusion chains it into a
 *            producer's stores, and its output may take a dying input's
 *            storage (in place)
 *     VEC    its pointwise form has a lane-wise vector form (opset 7 on:
 *            older opsets broadcast their own way), so a fused epilogue of
 *            it stays vectorised
 *     REMAP  the layout pass may run it in a permuted layout (channels-last)
 *            by permuting its operands instead of transposing back
 *     INTERNAL  made by modelc's passes (the layout pass's channels-last
 *            forms, the quantize pass's integer ops), never read from a model
 *   macs   how one run's multiply-accumulates count (aot/macs.c):
 *     NONE      not counted (memory-bound)
 *     CONV      output elements x weight elements per output channel (input 1)
 *     QCONV     the same with the weight at input 3 (QLinearConv)
 *     CONV_T    input elements x weight elements per input channel
 *     GEMM      output elements x K (A's dim 1, dim 0 under transA)
 *     MATMUL    output elements x A's last dim
 *     BRANCHES  the larger of its subgraphs (If)
 *     BODY      its body once per iteration (Loop, Scan; once where the
 *               count is not known at compile time) */
#ifndef MODELC_OPTAB_H
#define MODELC_OPTAB_H

enum {
	MC_OF_PW = 1u << 0,
	MC_OF_VEC = 1u << 1,
	MC_OF_REMAP = 1u << 2,
	/* made by modelc's passes, never read from a model (mc_opid_of skips it) */
	MC_OF_INTERNAL = 1u << 3,
};

typedef enum {
	MC_MACS_NONE,
	MC_MACS_CONV,
	MC_MACS_QCONV,
	MC_MACS_CONV_T,
	MC_MACS_GEMM,
	MC_MACS_MATMUL,
	MC_MACS_BRANCHES,
	MC_MACS_BODY,
	MC_MACS_RNN,
} mc_macs_kind;

/* X(name, facts, macs) */
#define MC_OP_TABLE(X) \
	X(Relu,                      MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(LeakyRelu,                 MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Sigmoid,                   MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(HardSigmoid,               MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(HardSwish,                 MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Tanh,                      MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Exp,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Log,                       MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Sqrt,                      MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Erf,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Neg,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Abs,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Reciprocal,                MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Floor,                     MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Ceil,                      MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Round,                     MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Sign,                      MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Sin,                       MC_OF_PW,                                  MC_MACS_NONE) \
	X(Cos,                       MC_OF_PW,                                  MC_MACS_NONE) \
	X(Tan,                       MC_OF_PW,                                  MC_MACS_NONE) \
	X(Asin,                      MC_OF_PW,                                  MC_MACS_NONE) \
	X(Acos,                      MC_OF_PW,                                  MC_MACS_NONE) \
	X(Atan,                      MC_OF_PW,                                  MC_MACS_NONE) \
	X(Sinh,                      MC_OF_PW,                                  MC_MACS_NONE) \
	X(Cosh,                      MC_OF_PW,                                  MC_MACS_NONE) \
	X(Asinh,                     MC_OF_PW,                                  MC_MACS_NONE) \
	X(Acosh,                     MC_OF_PW,                                  MC_MACS_NONE) \
	X(Atanh,                     MC_OF_PW,                                  MC_MACS_NONE) \
	X(Elu,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Selu,                      MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Celu,                      MC_OF_PW | MC_OF_VEC,                      MC_MACS_NONE) \
	X(Softplus,                  MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Softsign,                  MC_OF_PW | MC_OF_VEC,                      MC_MACS_NONE) \
	X(ThresholdedRelu,           MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Gelu,                      MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Mish,                      MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(IsNaN,                     MC_OF_PW,                                  MC_MACS_NONE) \
	X(IsInf,                     MC_OF_PW,                                  MC_MACS_NONE) \
	X(Shrink,                    MC_OF_PW,                                  MC_MACS_NONE) \
	X(BitwiseNot,                MC_OF_PW,                                  MC_MACS_NONE) \
	X(Not,                       MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Add,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Sub,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Mul,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Div,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Pow,                       MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Mod,                       MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(PRelu,                     MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(BitShift,                  MC_OF_PW,                                  MC_MACS_NONE) \
	X(BitwiseAnd,                MC_OF_PW,                                  MC_MACS_NONE) \
	X(BitwiseOr,                 MC_OF_PW,                                  MC_MACS_NONE) \
	X(BitwiseXor,                MC_OF_PW,                                  MC_MACS_NONE) \
	X(Equal,                     MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Less,                      MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Greater,                   MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(LessOrEqual,               MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(GreaterOrEqual,            MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(And,                       MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Or,                        MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Xor,                       MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Max,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Min,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Sum,                       MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Mean,                      MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Clip,                      MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Where,                     MC_OF_PW | MC_OF_REMAP,                    MC_MACS_NONE) \
	X(Cast,                      MC_OF_REMAP,                               MC_MACS_NONE) \
	X(CastLike,                  0,                                         MC_MACS_NONE) \
	X(Identity,                  MC_OF_REMAP,                               MC_MACS_NONE) \
	X(Dropout,                   0,                                         MC_MACS_NONE) \
	X(Conv,                      0,                                         MC_MACS_CONV) \
	X(ConvInteger,               0,                                         MC_MACS_CONV) \
	X(ConvTranspose,             0,                                         MC_MACS_CONV_T) \
	X(MaxPool,                   0,                                         MC_MACS_NONE) \
	X(AveragePool,               0,                                         MC_MACS_NONE) \
	X(LpPool,                    0,                                         MC_MACS_NONE) \
	X(GlobalAveragePool,         0,                                         MC_MACS_NONE) \
	X(GlobalMaxPool,             0,                                         MC_MACS_NONE) \
	X(GlobalLpPool,              0,                                         MC_MACS_NONE) \
	X(Gemm,                      0,                                         MC_MACS_GEMM) \
	X(MatMul,                    0,                                         MC_MACS_MATMUL) \
	X(MatMulInteger,             0,                                         MC_MACS_MATMUL) \
	X(Constant,                  0,                                         MC_MACS_NONE) \
	X(Reshape,                   0,                                         MC_MACS_NONE) \
	X(Flatten,                   0,                                         MC_MACS_NONE) \
	X(Squeeze,                   0,                                         MC_MACS_NONE) \
	X(Unsqueeze,                 0,                                         MC_MACS_NONE) \
	X(Transpose,                 0,                                         MC_MACS_NONE) \
	X(Concat,                    0,                                         MC_MACS_NONE) \
	X(Split,                     0,                                         MC_MACS_NONE) \
	X(Shape,                     0,                                         MC_MACS_NONE) \
	X(Size,                      0,                                         MC_MACS_NONE) \
	X(ConstantOfShape,           0,                                         MC_MACS_NONE) \
	X(Range,                     0,                                         MC_MACS_NONE) \
	X(Expand,                    0,                                         MC_MACS_NONE) \
	X(Tile,                      0,                                         MC_MACS_NONE) \
	X(EyeLike,                   0,                                         MC_MACS_NONE) \
	X(Slice,                     0,                                         MC_MACS_NONE) \
	X(Gather,                    0,                                         MC_MACS_NONE) \
	X(GatherElements,            0,                                         MC_MACS_NONE) \
	X(GatherND,                  0,                                         MC_MACS_NONE) \
	X(Scatter,                   0,                                         MC_MACS_NONE) \
	X(ScatterElements,           0,                                         MC_MACS_NONE) \
	X(ScatterND,                 0,                                         MC_MACS_NONE) \
	X(Pad,                       0,                                         MC_MACS_NONE) \
	X(Resize,                    0,                                         MC_MACS_NONE) \
	X(Upsample,                  0,                                         MC_MACS_NONE) \
	X(DepthToSpace,              0,                                         MC_MACS_NONE) \
	X(SpaceToDepth,              0,                                         MC_MACS_NONE) \
	X(OneHot,                    0,                                         MC_MACS_NONE) \
	X(Trilu,                     0,                                         MC_MACS_NONE) \
	X(Compress,                  0,                                         MC_MACS_NONE) \
	X(ReduceSum,                 0,                                         MC_MACS_NONE) \
	X(ReduceMean,                0,                                         MC_MACS_NONE) \
	X(ReduceProd,                0,                                         MC_MACS_NONE) \
	X(ReduceMax,                 0,                                         MC_MACS_NONE) \
	X(ReduceMin,                 0,                                         MC_MACS_NONE) \
	X(ReduceL1,                  0,                                         MC_MACS_NONE) \
	X(ReduceL2,                  0,                                         MC_MACS_NONE) \
	X(ReduceLogSum,              0,                                         MC_MACS_NONE) \
	X(ReduceLogSumExp,           0,                                         MC_MACS_NONE) \
	X(ReduceSumSquare,           0,                                         MC_MACS_NONE) \
	X(ArgMax,                    0,                                         MC_MACS_NONE) \
	X(ArgMin,                    0,                                         MC_MACS_NONE) \
	X(Softmax,                   0,                                         MC_MACS_NONE) \
	X(LogSoftmax,                0,                                         MC_MACS_NONE) \
	X(Hardmax,                   0,                                         MC_MACS_NONE) \
	X(CumSum,                    0,                                         MC_MACS_NONE) \
	X(TopK,                      0,                                         MC_MACS_NONE) \
	X(BatchNormalization,        0,                                         MC_MACS_NONE) \
	X(InstanceNormalization,     0,                                         MC_MACS_NONE) \
	X(LayerNormalization,        0,                                         MC_MACS_NONE) \
	X(GroupNormalization,        0,                                         MC_MACS_NONE) \
	X(LpNormalization,           0,                                         MC_MACS_NONE) \
	X(MeanVarianceNormalization, 0,                                         MC_MACS_NONE) \
	X(LRN,                       0,                                         MC_MACS_NONE) \
	X(RNN,                       0,                                         MC_MACS_RNN) \
	X(GRU,                       0,                                         MC_MACS_RNN) \
	X(LSTM,                      0,                                         MC_MACS_RNN) \
	X(If,                        0,                                         MC_MACS_BRANCHES) \
	X(QuantizeLinear,            0,                                         MC_MACS_NONE) \
	X(DequantizeLinear,          0,                                         MC_MACS_NONE) \
	X(DynamicQuantizeLinear,     0,                                         MC_MACS_NONE) \
	X(QLinearMatMul,             0,                                         MC_MACS_MATMUL) \
	X(QLinearConv,               0,                                         MC_MACS_QCONV) \
	X(Einsum,                    0,                                         MC_MACS_NONE) \
	X(RMSNormalization,          0,                                         MC_MACS_NONE) \
	X(Swish,                     MC_OF_PW | MC_OF_VEC | MC_OF_REMAP,        MC_MACS_NONE) \
	X(Attention,                 0,                                         MC_MACS_NONE) \
	X(RotaryEmbedding,           0,                                         MC_MACS_NONE) \
	X(GridSample,                0,                                         MC_MACS_NONE) \
	X(RoiAlign,                  0,                                         MC_MACS_NONE) \
	X(Det,                       0,                                         MC_MACS_NONE) \
	X(CenterCropPad,             0,                                         MC_MACS_NONE) \
	X(Col2Im,                    0,                                         MC_MACS_NONE) \
	X(NonZero,                   0,                                         MC_MACS_NONE) \
	X(Unique,                    0,                                         MC_MACS_NONE) \
	X(NonMaxSuppression,         0,                                         MC_MACS_NONE) \
	X(Loop,                      0,                                         MC_MACS_BODY) \
	X(Scan,                      0,                                         MC_MACS_BODY) \
	X(DFT,                       0,                                         MC_MACS_NONE) \
	X(STFT,                      0,                                         MC_MACS_NONE) \
	X(HannWindow,                0,                                         MC_MACS_NONE) \
	X(HammingWindow,             0,                                         MC_MACS_NONE) \
	X(BlackmanWindow,            0,                                         MC_MACS_NONE) \
	X(MelWeightMatrix,           0,                                         MC_MACS_NONE) \
	X(CumProd,                   0,                                         MC_MACS_NONE) \
	X(NegativeLogLikelihoodLoss, 0,                                         MC_MACS_NONE) \
	X(SoftmaxCrossEntropyLoss,   0,                                         MC_MACS_NONE) \
	X(NhwcConv,                  MC_OF_INTERNAL,                            MC_MACS_CONV) \
	X(NhwcMaxPool,               MC_OF_INTERNAL,                            MC_MACS_NONE) \
	X(NhwcAveragePool,           MC_OF_INTERNAL,                            MC_MACS_NONE) \
	X(QiConv,                    MC_OF_INTERNAL,                            MC_MACS_CONV) \
	X(QiMatMul,                  MC_OF_INTERNAL,                            MC_MACS_MATMUL) \
	X(QiAdd,                     MC_OF_INTERNAL | MC_OF_PW,                 MC_MACS_NONE) \
	X(QiMul,                     MC_OF_INTERNAL | MC_OF_PW,                 MC_MACS_NONE) \
	X(QiRequant,                 MC_OF_INTERNAL | MC_OF_PW,                 MC_MACS_NONE) \
	X(QiQuantize,                MC_OF_INTERNAL | MC_OF_PW,                 MC_MACS_NONE) \
	X(QiLut,                     MC_OF_INTERNAL,                            MC_MACS_NONE) \
	X(QiAvgPool,                 MC_OF_INTERNAL,                            MC_MACS_NONE) \
	X(QiSoftmax,                 MC_OF_INTERNAL,                            MC_MACS_NONE) \
	X(Unreachable,               MC_OF_INTERNAL,                            MC_MACS_NONE)

typedef enum {
	MC_OP_NONE, /* not in the table (another domain, an unknown op) */
#define MC_OP_ENUM(name, facts, macs) MC_OP_##name,
	MC_OP_TABLE(MC_OP_ENUM)
#undef MC_OP_ENUM
	MC_OP__COUNT
} mc_opid;

typedef struct {
	const char *name;
	unsigned facts;
	mc_macs_kind macs;
} mc_opinfo;

/* Row id of the table; the row of MC_OP_NONE has name "" and no facts. */
const mc_opinfo *mc_opinfo_of(mc_opid id);
/* The id of a default-domain op_type as a model names it; MC_OP_NONE if
 * the table has none (internal ops included: a model cannot name them). */
mc_opid mc_opid_of(const char *op_type);
static inline const char *mc_op_name(mc_opid id) { return mc_opinfo_of(id)->name; }
static inline bool mc_op_has(mc_opid id, unsigned facts) { return (mc_opinfo_of(id)->facts & facts) == facts; }

#endif
