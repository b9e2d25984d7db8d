// kiln: the elementwise rows of the op table, for generating one function per
// row. KILN_FOR_ELEMENTWISE_ROW(U, B) expands, for each row of tensor/ops.def,
// to U(Id, name) for a unary row whose result is computed from its input
// (every unary row but cast, whose dtype is an attribute) and to B(Id, name)
// for a binary row; other rows expand to nothing. Use it as
//   #define KILN_OP(id, name, arity, cat, rule) KILN_FOR_ELEMENTWISE_ROW(U, B, id, name, cat, rule)
//   #include "ops.def"
//   #undef KILN_OP
// (macro-only header; no declarations).
#pragma once

#define KILN_ER_Unary_Same(U, B, id, name) U(id, name)
#define KILN_ER_Unary_Float(U, B, id, name) U(id, name)
#define KILN_ER_Unary_ToBool(U, B, id, name) U(id, name)
#define KILN_ER_Unary_Attr(U, B, id, name)
#define KILN_ER_Unary(U, B, id, name, rule) KILN_ER_Unary_##rule(U, B, id, name)
#define KILN_ER_Binary(U, B, id, name, rule) B(id, name)
#define KILN_ER_Ternary(U, B, id, name, rule)
#define KILN_ER_Reduce(U, B, id, name, rule)
#define KILN_ER_Scan(U, B, id, name, rule)
#define KILN_ER_RowNorm(U, B, id, name, rule)
#define KILN_ER_Matmul(U, B, id, name, rule)
#define KILN_ER_View(U, B, id, name, rule)
#define KILN_ER_Data(U, B, id, name, rule)
#define KILN_ER_Linalg(U, B, id, name, rule)
#define KILN_FOR_ELEMENTWISE_ROW(U, B, id, name, cat, rule) KILN_ER_##cat(U, B, id, name, rule)
