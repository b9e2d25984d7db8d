// kiln: safetensors files (a named set of tensors), read and written
// following the format's spec: an 8-byte little-endian header length N, N
// bytes of JSON {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets":
// [begin, end]}, ..., "__metadata__": {"key": "value"}}, then the byte buffer
// the offsets index (little-endian, C order).
#pragma once
#include <map>
#include <string>
#include <string_view>

#include "../tensor/tensor.h"
#include "csv.h"  // IoError

namespace kiln {

/// Reads every tensor of a safetensors file into new contiguous CPU tensors.
/// dtypes: F32 F64 F16 BF16 I16 I32 I64 U8 U16 U32 U64 I8 BOOL. Throws IoError
/// "read_safetensors: '<path>': ..." for a missing file, a header length
/// past the end, a header that is not valid JSON or not an object, an entry
/// without dtype/shape/data_offsets, a dtype kiln does not have (named with
/// its tensor), offsets outside the data or not matching the shape, a
/// bool byte other than 0 or 1, a key that appears twice in one JSON object
/// (a tensor named twice: JSON parsers would keep only one), and offsets that
/// do not tile the data section exactly as the spec requires (two tensors'
/// bytes overlap, or bytes before, between or after them belong to no
/// tensor; each message names the tensors). `__metadata__` is read and ignored.
std::map<std::string, Tensor> read_safetensors(const std::string& path);
/// As read_safetensors, from the file's bytes; `what` names them in messages.
std::map<std::string, Tensor> parse_safetensors(std::string_view bytes, const std::string& what = "<memory>");

/// Writes `tensors` (any layout, CPU; written C-order) in name order, with
/// optional string `metadata`. Throws IoError for a non-CPU or undefined
/// tensor, an empty name, or a file that cannot be written.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
/// The file's bytes for `tensors`.
std::string encode_safetensors(const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

}  // namespace kiln
