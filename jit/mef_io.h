// kiln (internal): the little-endian writers and the bounds-checked reader
// (Cursor) of MEF section payloads, shared by jit/mef.cpp and
// jit/mef_plan.cpp. A Cursor's every read checks the bytes that remain first,
// and its errors are ValueErrors naming the section, the byte offset and the
// field.
#pragma once
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>

#include "../trace/graph.h"
#include "../trace/treedef_io.h"

namespace kiln::mef::io {

/// "'<tag>' (<what the section holds>)".
std::string tag_str(std::string_view tag);
/// Throws ValueError "engine::read: '<what>': <msg>".
[[noreturn]] void fail(const std::string& what, const std::string& msg);

// ---- little-endian writing ----------------------------------------------------------

inline void put_u8(std::string& o, uint8_t v) { o += static_cast<char>(v); }
inline void put_u32(std::string& o, uint32_t v) {
  for (int i = 0; i < 4; ++i) o += static_cast<char>((v >> (8 * i)) & 0xff);
}
inline void put_u64(std::string& o, uint64_t v) {
  for (int i = 0; i < 8; ++i) o += static_cast<char>((v >> (8 * i)) & 0xff);
}
inline void put_str(std::string& o, std::string_view s) {
  if (s.size() > UINT32_MAX) throw ValueError("export_mef: a string of " + std::to_string(s.size()) + " bytes is too long");
  put_u32(o, static_cast<uint32_t>(s.size()));
  o.append(s);
}
inline void put_type(std::string& o, DType d, Device dev, const Shape& shape) {
  put_u8(o, static_cast<uint8_t>(d));
  put_u8(o, static_cast<uint8_t>(dev.type));
  put_u32(o, static_cast<uint32_t>(dev.index));
  put_u32(o, static_cast<uint32_t>(shape.size()));
  for (int64_t e : shape) put_u64(o, static_cast<uint64_t>(e));
}
inline void put_layout(std::string& o, const TensorLayout& l) {
  put_u8(o, static_cast<uint8_t>(l.dtype));
  put_u8(o, static_cast<uint8_t>(l.device.type));
  put_u32(o, static_cast<uint32_t>(l.device.index));
  put_u8(o, static_cast<uint8_t>(l.stride_class));
  put_u32(o, static_cast<uint32_t>(l.shape.size()));
  for (int64_t e : l.shape) put_u64(o, static_cast<uint64_t>(e));
}

inline void put_i32(std::string& o, int32_t v) { put_u32(o, static_cast<uint32_t>(v)); }
inline void put_i64(std::string& o, int64_t v) { put_u64(o, static_cast<uint64_t>(v)); }

inline uint32_t get_u32_at(std::string_view b, size_t pos) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(b[pos + i])) << (8 * i);
  return v;
}
inline uint64_t get_u64_at(std::string_view b, size_t pos) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[pos + i])) << (8 * i);
  return v;
}

// ---- bounds-checked reading of one section's payload ---------------------------------

struct Cursor {
  std::string_view s;
  size_t pos = 0;
  std::string_view tag;
  const std::string& what;

  [[noreturn]] void bad(const std::string& msg) const {
    fail(what, "section " + tag_str(tag) + " is malformed at byte " + std::to_string(pos) + " of " +
                   std::to_string(s.size()) + ": " + msg);
  }
  /// As bad(), naming byte `at` (where the offending field starts).
  [[noreturn]] void bad_at(size_t at, const std::string& msg) const {
    fail(what, "section " + tag_str(tag) + " is malformed at byte " + std::to_string(at) + " of " +
                   std::to_string(s.size()) + ": " + msg);
  }
  size_t left() const { return s.size() - pos; }
  // The check inline, the message out of line (need() runs for every field).
  void need(size_t n, const char* field) const {
    if (n > left()) [[unlikely]]
      too_short(n, field);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void too_short(size_t n, const char* field) const {
    bad(std::string("needs ") + std::to_string(n) + " bytes for " + field + ", " + std::to_string(left()) + " remain");
  }
  uint8_t u8(const char* field) {
    need(1, field);
    return static_cast<uint8_t>(s[pos++]);
  }
  uint32_t u32(const char* field) {
    need(4, field);
    uint32_t v = get_u32_at(s, pos);
    pos += 4;
    return v;
  }
  uint64_t u64(const char* field) {
    need(8, field);
    uint64_t v = get_u64_at(s, pos);
    pos += 8;
    return v;
  }
  int32_t i32(const char* field) { return static_cast<int32_t>(u32(field)); }
  int64_t i64(const char* field) { return static_cast<int64_t>(u64(field)); }
  std::string_view str_view(const char* field) {
    uint32_t n = u32(field);
    need(n, field);
    std::string_view r = s.substr(pos, n);
    pos += n;
    return r;
  }
  std::string str(const char* field) {
    uint32_t n = u32(field);
    need(n, field);
    std::string r(s.substr(pos, n));
    pos += n;
    return r;
  }
  // A count of items each at least `min_bytes` long: capped by what remains,
  // so a corrupted count cannot make us allocate more than the file holds.
  uint32_t count(const char* field, size_t min_bytes) {
    uint32_t n = u32(field);
    if (static_cast<uint64_t>(n) * min_bytes > left()) [[unlikely]]
      too_many(field, n);
    return n;
  }
  [[noreturn, gnu::cold, gnu::noinline]] void too_many(const char* field, uint32_t n) const {
    bad(std::string(field) + " says " + std::to_string(n) + " items, but only " + std::to_string(left()) +
        " bytes remain");
  }
  DType dtype() {
    uint8_t d = u8("a dtype");
    if (d >= kNumDTypes) bad("unknown dtype code " + std::to_string(d));
    return static_cast<DType>(d);
  }
  Device device() {
    uint8_t t = u8("a device type");
    uint32_t idx = u32("a device index");
    if (t > static_cast<uint8_t>(DeviceType::cuda)) bad("unknown device type code " + std::to_string(t));
    if (idx > 1024) bad("device index " + std::to_string(idx) + " is out of range");
    return Device{static_cast<DeviceType>(t), static_cast<int>(idx)};
  }
  Shape shape() {
    uint32_t nd = count("a rank", 8);
    Shape s(nd);
    for (auto& e : s) {
      uint64_t v = u64("an extent");
      if (v > static_cast<uint64_t>(INT64_MAX)) bad("negative extent");
      e = static_cast<int64_t>(v);
    }
    try {
      checked_numel(s);
    } catch (const Error&) {
      bad("the element count of shape " + shape_str(s) + " overflows");
    }
    return s;
  }
  TensorLayout layout() {
    TensorLayout l;
    l.dtype = dtype();
    l.device = device();
    uint8_t sc = u8("a stride class");
    if (sc > static_cast<uint8_t>(StrideClass::general)) bad("unknown stride class code " + std::to_string(sc));
    l.stride_class = static_cast<StrideClass>(sc);
    l.shape = shape();
    return l;
  }
  TreeDef tree(const char* field) {
    std::string t = str(field);
    try {
      return parse_treedef(t);
    } catch (const Error& e) {
      bad(std::string(field) + ": " + e.what());
    }
  }
  void end() const {
    if (left() != 0) bad(std::to_string(left()) + " unexpected bytes at the end");
  }
};

}  // namespace kiln::mef::io
