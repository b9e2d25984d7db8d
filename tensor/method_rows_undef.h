// kiln (internal): undefines the KILN_M_* family macros an includer of
// method_rows.h defined (no include guard: included after each use).
#undef KILN_M_UNARY
#undef KILN_M_BINARY
#undef KILN_M_TENSOR
#undef KILN_M_CAST
#undef KILN_M_REDUCE
#undef KILN_M_ARGREDUCE
#undef KILN_M_MOMENT
#undef KILN_M_SCAN
#undef KILN_M_SORT
#undef KILN_M_SOFTMAX
#undef KILN_M_LAYER_NORM
#undef KILN_M_RMS_NORM
#undef KILN_M_SHAPE
#undef KILN_M_SLICE
#undef KILN_M_SELECT
#undef KILN_M_AXES
#undef KILN_M_AXIS
#undef KILN_M_REPS
#undef KILN_M_PAD
#undef KILN_M_AXIS_INDEX
#undef KILN_M_ONE_HOT
#undef KILN_M_SCATTER
#undef KILN_M_INDEX_ADD
