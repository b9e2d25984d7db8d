// kiln: numpy's .npy files (one array), read and written following the
// format's spec (numpy.lib.format): the magic "\x93NUMPY", a version byte
// pair (1.0: 2-byte header length; 2.0 and 3.0: 4-byte), a Python-literal
// header dict {'descr': ..., 'fortran_order': ..., 'shape': (...)}, then the
// raw little-endian data.
#pragma once
#include <string>
#include <string_view>

#include "../tensor/tensor.h"
#include "csv.h"  // IoError

namespace kiln {

/// Reads one .npy file into a new contiguous CPU tensor. Accepted dtypes
/// (the ones kiln has): <f4 <f8 <f2 <i2 <i4 <i8 <u2 <u4 <u8 |u1 |i1 |b1 (for one-byte types
/// '|', '<' and '=' are the same). Fortran-order files are read and made
/// C-order. Throws IoError "read_npy: '<path>': ..." for a missing file, a bad
/// magic or version, a malformed header, a big-endian or unknown dtype
/// (bfloat16 has no npy code), data shorter or longer than the shape needs,
/// or a bool byte other than 0 or 1.
Tensor read_npy(const std::string& path);
/// As read_npy, from the file's bytes; `what` names them in messages.
Tensor parse_npy(std::string_view bytes, const std::string& what = "<memory>");

/// Writes `t` (any layout; written C-order, little-endian) as a .npy file of
/// format version 1.0 (2.0 when the header needs more than 65535 bytes).
/// Throws IoError for bfloat16 (npy has no code for it: convert to float32
/// first), a non-CPU tensor, or a file that cannot be written.
void write_npy(const std::string& path, const Tensor& t);
/// The .npy file's bytes for `t`.
std::string encode_npy(const Tensor& t);

}  // namespace kiln
