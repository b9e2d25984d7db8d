// .npy reading and writing. The header is a Python dict literal, parsed here
// with a small bounds-checked reader (it is not JSON: single quotes, tuples,
// True/False).
#include "npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "file_bytes.h"

namespace kiln {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string& op, const std::string& what, const std::string& msg) {
  throw IoError(op + ": '" + what + "': " + msg);
}

struct Descr {
  const char* code;  // without the byte-order character
  DType dtype;
};
constexpr Descr kDescrs[] = {{"f4", DType::float32}, {"f8", DType::float64}, {"f2", DType::float16},
                             {"i4", DType::int32},   {"i8", DType::int64},   {"u1", DType::uint8},
                             {"i1", DType::int8},    {"b1", DType::bool_},   {"i2", DType::int16},
                             {"u2", DType::uint16},  {"u4", DType::uint32},  {"u8", DType::uint64}};

DType dtype_from_descr(const std::string& d, const std::string& what) {
  if (d.size() == 3) {
    const char order = d[0];
    for (const Descr& x : kDescrs) {
      if (d.compare(1, 2, x.code) != 0) continue;
      const bool one_byte = size_of(x.dtype) == 1;
      if (order == '<' || order == '|' || (order == '=' && one_byte) || (order == '>' && one_byte)) return x.dtype;
      if (order == '>')
        fail("read_npy", what, "dtype '" + d + "' is big-endian; kiln reads little-endian files (in numpy: a.astype('<" +
                                   d.substr(1) + "'))");
    }
  }
  fail("read_npy", what, "dtype '" + d + "' is not one kiln has (it reads <f4 <f8 <f2 <i2 <i4 <i8 <u2 <u4 <u8 |u1 |i1 |b1)");
}

const char* descr_of(DType d) {
  switch (d) {
    case DType::float32: return "<f4";
    case DType::float64: return "<f8";
    case DType::float16: return "<f2";
    case DType::int32: return "<i4";
    case DType::int64: return "<i8";
    case DType::uint8: return "|u1";
    case DType::int8: return "|i1";
    case DType::bool_: return "|b1";
    case DType::int16: return "<i2";
    case DType::uint16: return "<u2";
    case DType::uint32: return "<u4";
    case DType::uint64: return "<u8";
    case DType::bfloat16: break;
  }
  return nullptr;
}

// The header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct HeaderParser {
  std::string_view s;
  const std::string& what;
  size_t pos = 0;

  [[noreturn]] void bad(const std::string& msg) const {
    fail("read_npy", what, "malformed header at character " + std::to_string(pos) + ": " + msg);
  }
  void ws() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r')) ++pos;
  }
  bool accept(char c) {
    ws();
    if (pos < s.size() && s[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) bad(std::string("expected '") + c + "'");
  }
  std::string str() {
    ws();
    if (pos >= s.size() || (s[pos] != '\'' && s[pos] != '"')) bad("expected a quoted string");
    const char q = s[pos++];
    size_t b = pos;
    while (pos < s.size() && s[pos] != q) ++pos;
    if (pos >= s.size()) bad("unterminated string");
    return std::string(s.substr(b, pos++ - b));
  }
  bool boolean() {
    ws();
    if (s.substr(pos, 4) == "True") {
      pos += 4;
      return true;
    }
    if (s.substr(pos, 5) == "False") {
      pos += 5;
      return false;
    }
    bad("expected True or False");
  }
  Shape shape() {
    expect('(');
    Shape r;
    while (!accept(')')) {
      ws();
      size_t b = pos;
      int64_t v = 0;
      while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
        if (v > (INT64_MAX - 9) / 10) bad("an extent is too large");
        v = v * 10 + (s[pos++] - '0');
      }
      if (pos < s.size() && s[pos] == 'L') ++pos;  // Python 2 longs
      if (b == pos) bad("expected a non-negative integer extent");
      r.push_back(v);
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return r;
  }
};

// What a .npy header declares.
struct NpyHeader {
  DType dtype;
  Shape shape;
  bool fortran = false;
  std::string descr;
  size_t data_at = 0;  // where the data starts
};

// Parses the magic, version and header dict of `b` (which must hold them:
// else the truncation is reported).
NpyHeader parse_npy_header(std::string_view b, const std::string& what) {
  if (b.size() < kMagicLen || std::memcmp(b.data(), kMagic, kMagicLen) != 0)
    fail("read_npy", what, "not a .npy file (it does not start with \"\\x93NUMPY\")");
  if (b.size() < 10) fail("read_npy", what, "the file is truncated inside its header");
  const uint8_t major = static_cast<uint8_t>(b[6]), minor = static_cast<uint8_t>(b[7]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = static_cast<uint8_t>(b[8]) | (static_cast<size_t>(static_cast<uint8_t>(b[9])) << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) fail("read_npy", what, "the file is truncated inside its header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<uint8_t>(b[8 + i])) << (8 * i);
    hstart = 12;
  } else {
    fail("read_npy", what, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                               " is not one kiln reads (1.0, 2.0, 3.0)");
  }
  if (hlen > b.size() - hstart)
    fail("read_npy", what, "the file is truncated: its header needs " + std::to_string(hlen) + " bytes, " +
                               std::to_string(b.size() - hstart) + " remain");
  HeaderParser p{b.substr(hstart, hlen), what};
  std::string descr;
  bool fortran = false, have_descr = false, have_order = false, have_shape = false;
  Shape shape;
  p.expect('{');
  while (!p.accept('}')) {
    std::string key = p.str();
    p.expect(':');
    if (key == "descr") {
      descr = p.str();
      have_descr = true;
    } else if (key == "fortran_order") {
      fortran = p.boolean();
      have_order = true;
    } else if (key == "shape") {
      shape = p.shape();
      have_shape = true;
    } else {
      p.bad("unknown key '" + key + "' (expected descr, fortran_order, shape)");
    }
    if (!p.accept(',')) {
      p.expect('}');
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape)
    fail("read_npy", what, "the header lacks '" + std::string(!have_descr ? "descr" : !have_order ? "fortran_order" : "shape") + "'");
  const DType dtype = dtype_from_descr(descr, what);
  try {
    (void)checked_numel(shape, "read_npy");
  } catch (const Error&) {
    fail("read_npy", what, "shape " + shape_str(shape) + " has too many elements");
  }
  return NpyHeader{dtype, shape, fortran, descr, hstart + hlen};
}
}  // namespace

Tensor parse_npy(std::string_view b, const std::string& what) {
  const NpyHeader hd = parse_npy_header(b, what);
  const DType dtype = hd.dtype;
  const Shape& shape = hd.shape;
  const bool fortran = hd.fortran;
  const std::string& descr = hd.descr;
  const int64_t numel = checked_numel(shape, "read_npy");
  const size_t data_at = hd.data_at;
  const size_t have = b.size() - data_at, isz = size_of(dtype);
  if (static_cast<uint64_t>(numel) > have / isz)
    fail("read_npy", what, "the file is truncated: shape " + shape_str(shape) + " of " + descr + " needs " +
                               std::to_string(numel) + " x " + std::to_string(isz) + " data bytes, the file has " +
                               std::to_string(have));
  const size_t nbytes = static_cast<size_t>(numel) * isz;
  if (nbytes != have)
    fail("read_npy", what, "the file has " + std::to_string(have - nbytes) + " bytes after the " +
                               std::to_string(nbytes) + " data bytes of shape " + shape_str(shape) + " of " + descr);
  if (dtype == DType::bool_)
    for (size_t i = 0; i < nbytes; ++i)
      if (static_cast<uint8_t>(b[data_at + i]) > 1)
        fail("read_npy", what, "bool element " + std::to_string(i) + " is byte " +
                                   std::to_string(static_cast<uint8_t>(b[data_at + i])) + ", not 0 or 1");
  Shape stored = shape;
  if (fortran) stored.assign(shape.rbegin(), shape.rend());  // column-major = the reversed shape in C order
  Tensor t = Tensor::empty(stored, dtype);
  if (nbytes) std::memcpy(t.data_ptr(), b.data() + data_at, nbytes);
  if (fortran && shape.size() > 1) {
    std::vector<int64_t> axes(shape.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(axes.size() - 1 - i);
    t = t.permute(axes).contiguous();
  }
  return t;
}

Tensor read_npy(const std::string& path) {
  // The magic is checked on the first bytes and only what the header
  // declares is read (tester t17 F4: /dev/zero was read whole first).
  auto want = [&](std::string_view b) -> uint64_t {
    if (std::memcmp(b.data(), kMagic, std::min(b.size(), kMagicLen)) != 0)
      fail("read_npy", path, "not a .npy file (it does not start with \"\\x93NUMPY\")");
    if (b.size() < 10) return 10;
    const uint8_t major = static_cast<uint8_t>(b[6]);
    size_t hlen = static_cast<uint8_t>(b[8]) | (static_cast<size_t>(static_cast<uint8_t>(b[9])) << 8), hstart = 10;
    if (major == 2 || major == 3) {
      if (b.size() < 12) return 12;
      hlen = 0;
      for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<uint8_t>(b[8 + i])) << (8 * i);
      hstart = 12;
    } else if (major != 1) {
      return b.size();  // parse_npy names the version
    }
    if (b.size() < hstart + hlen) return hstart + hlen;
    const NpyHeader h = parse_npy_header(b, path);
    const uint64_t numel = static_cast<uint64_t>(checked_numel(h.shape, "read_npy"));
    const uint64_t isz = size_of(h.dtype);
    if (numel > (UINT64_MAX - h.data_at) / isz) return b.size();  // parse_npy reports it
    return h.data_at + numel * isz;
  };
  return parse_npy(io_detail::read_file_bytes_bounded(path, "read_npy", want), path);
}

std::string encode_npy(const Tensor& t) {
  if (!t.defined()) throw IoError("write_npy: an undefined tensor");
  const char* descr = descr_of(t.dtype());
  if (!descr)
    throw IoError("write_npy: numpy's .npy has no bfloat16 type; convert first (t.to(DType::float32))");
  if (!t.device().is_cpu()) throw IoError("write_npy: the tensor is on " + t.device().str() + "; copy it to the CPU first");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
  if (t.shape().size() == 1) shape += ",";
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and end with '\n' so the data starts at a multiple of 64.
  size_t prefix = 10;
  if ((header.size() + 1 + prefix + 63) / 64 * 64 - prefix > 65535) prefix = 12;
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(prefix == 10 ? 1 : 2);
  out += '\0';
  const size_t hl = header.size();
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((hl >> (8 * i)) & 0xff);
  out += header;
  Tensor c = t.contiguous();
  const size_t nbytes = static_cast<size_t>(c.numel()) * c.itemsize();
  if (nbytes) out.append(static_cast<const char*>(c.data_ptr()), nbytes);
  return out;
}

void write_npy(const std::string& path, const Tensor& t) {
  std::string bytes;
  try {
    bytes = encode_npy(t);
  } catch (const IoError& e) {
    throw IoError(std::string("write_npy: '") + path + "': " + (e.what() + std::strlen("write_npy: ")));
  }
  io_detail::write_file_bytes(path, bytes, "write_npy");
}

}  // namespace kiln
