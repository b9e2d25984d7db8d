// kiln: which member function each op-table row gets (`x.exp()`,
// `x.add(y)`, `x.sum(axes, keepdim)`, `x.softmax(axis)`, ...).
// KILN_FOR_METHOD_ROW(id, name, cat, rule) expands, for a row of
// tensor/ops.def, to FAMILY(id, name) where FAMILY is one of the KILN_M_*
// macros the includer defines (one per signature family; tensor/tensor.h
// declares, tensor/methods.cpp defines each). Every Unary row gets
// KILN_M_UNARY (`x.name()`) and every Binary row KILN_M_BINARY (`x.name(y)`,
// `x.name(2.0)`): their bodies run the row itself, so an appended
// elementwise row gets its method. A row of another category names its
// family below (KILN_METHOD_<name>), e.g. KILN_M_REDUCE `x.name(axes = {},
// keepdim = false)`, KILN_M_ARGREDUCE `x.name(axis = nullopt, keepdim =
// false)`, KILN_M_SORT `x.name(axis = -1, descending = false)`,
// KILN_M_SOFTMAX `x.name(axis = -1)`, KILN_M_TENSOR `x.name(w)`; without
// one it gets no method.
// Use it as
//   #define KILN_OP(id, name, arity, cat, rule) KILN_FOR_METHOD_ROW(id, name, cat, rule)
//   #include "ops.def"
//   #undef KILN_OP
// (macro-only header; no declarations).
#pragma once

// KILN_METHOD_<name> expands to `~, FAMILY`; KILN_MR_PICK(name, dflt) gives
// FAMILY when that macro exists and dflt otherwise (an undefined
// KILN_METHOD_<name> stays one token, so the second argument is dflt).
#define KILN_MR_SECOND(a, b, ...) b
#define KILN_MR_SECOND_(...) KILN_MR_SECOND(__VA_ARGS__)
#define KILN_MR_PICK(name, dflt) KILN_MR_SECOND_(KILN_METHOD_##name, dflt, ~)

#define KILN_M_NONE(id, name)

// The rows outside Unary/Binary, each with its free function's signature
// family (a body calls kiln::<name>, so a row appended elsewhere gets no
// method until it is named here: appending rows never breaks this header).
#define KILN_METHOD_cast ~, KILN_M_CAST
#define KILN_METHOD_sum ~, KILN_M_REDUCE
#define KILN_METHOD_mean ~, KILN_M_REDUCE
#define KILN_METHOD_prod ~, KILN_M_REDUCE
#define KILN_METHOD_max ~, KILN_M_REDUCE
#define KILN_METHOD_min ~, KILN_M_REDUCE
#define KILN_METHOD_logsumexp ~, KILN_M_REDUCE
#define KILN_METHOD_any ~, KILN_M_REDUCE
#define KILN_METHOD_all ~, KILN_M_REDUCE
#define KILN_METHOD_cumsum ~, KILN_M_SCAN
#define KILN_METHOD_cumprod ~, KILN_M_SCAN
#define KILN_METHOD_softmax ~, KILN_M_SOFTMAX
#define KILN_METHOD_log_softmax ~, KILN_M_SOFTMAX
#define KILN_METHOD_matmul ~, KILN_M_TENSOR
#define KILN_METHOD_argmax ~, KILN_M_ARGREDUCE
#define KILN_METHOD_argmin ~, KILN_M_ARGREDUCE
#define KILN_METHOD_var ~, KILN_M_MOMENT
#define KILN_METHOD_std ~, KILN_M_MOMENT
#define KILN_METHOD_sort ~, KILN_M_SORT
#define KILN_METHOD_argsort ~, KILN_M_SORT
#define KILN_METHOD_layer_norm ~, KILN_M_LAYER_NORM
#define KILN_METHOD_rms_norm ~, KILN_M_RMS_NORM
#define KILN_METHOD_broadcast_to ~, KILN_M_SHAPE
#define KILN_METHOD_slice ~, KILN_M_SLICE
#define KILN_METHOD_select ~, KILN_M_SELECT
#define KILN_METHOD_squeeze ~, KILN_M_AXES
#define KILN_METHOD_flip ~, KILN_M_AXES
#define KILN_METHOD_unsqueeze ~, KILN_M_AXIS
#define KILN_METHOD_tile ~, KILN_M_REPS
#define KILN_METHOD_pad ~, KILN_M_PAD
#define KILN_METHOD_gather ~, KILN_M_AXIS_INDEX
#define KILN_METHOD_index_select ~, KILN_M_AXIS_INDEX
#define KILN_METHOD_one_hot ~, KILN_M_ONE_HOT
#define KILN_METHOD_scatter ~, KILN_M_SCATTER
#define KILN_METHOD_scatter_add ~, KILN_M_SCATTER
#define KILN_METHOD_index_add ~, KILN_M_INDEX_ADD
// reshape and permute are written on Tensor by hand (with transpose);
// where, clamp and concat take several tensors on equal footing.

#define KILN_MR_Unary(rule) KILN_M_UNARY
#define KILN_MR_Binary(rule) KILN_M_BINARY
#define KILN_MR_Ternary(rule) KILN_M_NONE
#define KILN_MR_Reduce(rule) KILN_M_NONE
#define KILN_MR_Scan(rule) KILN_M_NONE
#define KILN_MR_RowNorm(rule) KILN_M_NONE
#define KILN_MR_Matmul(rule) KILN_M_NONE
#define KILN_MR_View(rule) KILN_M_NONE
#define KILN_MR_Data(rule) KILN_M_NONE
#define KILN_MR_Linalg(rule) KILN_M_NONE
// (A new category needs a line here, as in elementwise_rows.h.)
#define KILN_MR_DEFAULT(cat, rule) KILN_MR_##cat(rule)

#define KILN_FOR_METHOD_ROW(id, name, cat, rule) KILN_MR_PICK(name, KILN_MR_DEFAULT(cat, rule))(id, name)
