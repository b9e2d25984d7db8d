// kiln (internal): the GRPB section of a MEF file (jit/mef.h): the optimised,
// flat graph in a compact binary form, next to its text form (GRPH), so that
// engine::read rebuilds the graph without parsing text. Added within format
// version 2: a reader that predates it skips it as an unknown section and
// parses GRPH; a reader that knows it uses it and leaves GRPH unparsed.
//
// Payload, all integers little-endian (str: u32 length and bytes):
//   u32 layout version (kGraphLayoutVersion)
//   str graph name
//   u32 K op names, each a str (an op-table row's name; nodes index them,
//       so the section does not depend on this build's op numbering)
//   u32 T types, each u8 dtype, u8 device type, u32 device index, u32 rank,
//       rank x i64 extents
//   u32 I inputs, each u32 type index: values 0 .. I-1
//   u32 N nodes, u64 constant pool bytes (the sum over the constants on cpu:0
//       of their byte sizes rounded up to 64: the reader keeps them in one
//       buffer), then each node: u8 kind and (each defines the next value, I + n):
//     1 op:       u32 op name index, u32 m + m x u32 operand values, u8 attribute
//                 mask (1 ints, 2 axis, 4 scalar, 8 flag, 16 dtype: the
//                 attributes that differ from their defaults), then the
//                 present ones: u32 n + n x i64 ints, i64 axis, f64 scalar
//                 (IEEE bits), u8 dtype; then u32 result type index
//     2 constant: u32 type index, then the value's bytes (numel x itemsize,
//                 little-endian, the length following from the type)
//     3 weight:   str name, u8 placeholder (0 or 1), u32 type index
//   u32 R results, each u32 value
// Values are numbered as Graph::parse numbers them when it reads GRPH (the
// inputs, then one per node in order), so the PLAN section's value ids hold
// for either form. Only flat graphs are written (no subgraphs or calls:
// what a MEF holds); encode_graph_binary returns "" for any other.
//
// Reading checks everything before it is used: counts against the bytes
// that remain, every index in range, every operand an earlier value, each
// weight named once (and without a line break), the graph name one that
// Graph::parse reads, each constant's length against its type; the graph is
// then checked as Graph::verify checks it (every op's result type is what
// infer_layout gives; run once per distinct op, operand types and
// attributes, the rest holds by construction). A violation is a ValueError
// "engine::read: '<what>': section 'GRPB' (the optimised graph, binary) is
// malformed at byte N of M: ..." (or "... fails verification: ..."); no
// input makes the read crash.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "../trace/graph.h"

namespace kiln::mef {

/// The GRPB payload layout this kiln writes and reads; a section of another
/// layout is ignored (the reader parses GRPH instead).
inline constexpr uint32_t kGraphLayoutVersion = 1;

/// The GRPB payload of `g`, or "" when `g` is not flat (subgraphs or calls).
std::string encode_graph_binary(const Graph& g);

/// The layout version a GRPB payload starts with (0 when it is shorter than 4 bytes).
uint32_t graph_binary_layout(std::string_view payload);

/// The graph in a GRPB payload of layout kGraphLayoutVersion, verified.
/// Throws ValueError naming 'GRPB', the byte offset and the field (see above).
std::shared_ptr<Graph> decode_graph_binary(std::string_view payload, const std::string& what);

}  // namespace kiln::mef
