// safetensors reading and writing; the JSON header goes through nlohmann::json.
#include "safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>
#include <vector>

#include "file_bytes.h"

namespace kiln {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& what, const std::string& msg) {
  throw IoError("read_safetensors: '" + what + "': " + msg);
}

struct Code {
  const char* name;
  DType dtype;
};
constexpr Code kCodes[] = {{"F32", DType::float32}, {"F64", DType::float64}, {"F16", DType::float16},
                           {"BF16", DType::bfloat16}, {"I32", DType::int32}, {"I64", DType::int64},
                           {"U8", DType::uint8},     {"I8", DType::int8},     {"BOOL", DType::bool_},
                           {"I16", DType::int16},    {"U16", DType::uint16},  {"U32", DType::uint32},
                           {"U64", DType::uint64}};

const char* code_of(DType d) {
  for (const Code& c : kCodes)
    if (c.dtype == d) return c.name;
  return "?";
}

uint64_t non_negative(const json& v, const std::string& what, const std::string& entry, const char* field) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
    fail(what, "tensor '" + entry + "': " + field + " holds " + v.dump() + ", not a non-negative integer");
  return v.get<uint64_t>();
}

/// The header parsed, refusing a key that appears twice in one object: JSON
/// allows it and nlohmann::json keeps the last value, which would let a
/// second entry for a tensor silently replace the first. A parser callback
/// sees every key before it is stored; one set of keys per open object.
json parse_header(std::string_view text, const std::string& what) {
  struct Open {
    std::set<std::string> keys;
    std::string last_key;  // the key whose value is being parsed
  };
  std::vector<Open> open;
  auto cb = [&](int /*depth*/, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      open.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (ev == json::parse_event_t::key && !open.empty()) {
      std::string k = parsed.get<std::string>();
      if (!open.back().keys.insert(k).second) {
        if (open.size() == 1)
          fail(what, k == "__metadata__" ? std::string("the header has '__metadata__' twice")
                                         : "the header has tensor '" + k + "' twice (expected each name once)");
        std::string where = "'" + open.front().last_key + "'";
        for (size_t i = 1; i + 1 < open.size(); ++i) where += " > '" + open[i].last_key + "'";
        fail(what, (open.front().last_key == "__metadata__" ? std::string("") : "tensor ") + where +
                       ": key '" + k + "' appears twice (expected each key once)");
      }
      open.back().last_key = std::move(k);
    }
    return true;
  };
  try {
    return json::parse(text, cb);
  } catch (const json::exception& e) {
    fail(what, std::string("the header is not valid JSON: ") + e.what());
  }
}

struct Extent {
  uint64_t begin, end;
  std::string name;
};

/// The spec's rule: the tensors' byte ranges, sorted, tile the data section
/// exactly, with no overlap and no byte that belongs to no tensor.
void check_tiling(std::vector<Extent> ex, uint64_t data_size, const std::string& what) {
  std::sort(ex.begin(), ex.end(), [](const Extent& a, const Extent& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  auto range = [](const Extent& e) {
    return "'" + e.name + "' [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  };
  uint64_t at = 0;
  for (size_t i = 0; i < ex.size(); ++i) {
    const Extent& e = ex[i];
    if (e.begin < at)
      fail(what, "the data_offsets of tensors " + range(ex[i - 1]) + " and " + range(e) +
                     " overlap (expected each tensor's bytes to follow the previous one's)");
    if (e.begin > at)
      fail(what, i == 0 ? "data bytes [0, " + std::to_string(e.begin) + ") before the first tensor, " + range(e) +
                              ", belong to no tensor (expected the first to start at 0)"
                        : "data bytes [" + std::to_string(at) + ", " + std::to_string(e.begin) +
                              ") between tensors " + range(ex[i - 1]) + " and " + range(e) +
                              " belong to no tensor (expected no gap)");
    at = e.end;
  }
  if (at != data_size)
    fail(what, ex.empty() ? std::to_string(data_size) + " data bytes follow a header with no tensors (expected none)"
                          : "data bytes [" + std::to_string(at) + ", " + std::to_string(data_size) +
                                ") after the last tensor, " + range(ex.back()) +
                                ", belong to no tensor (expected the tensors to end at the end of the file)");
}

}  // namespace

// safetensors' own limit on the header (the reference implementation's
// MAX_HEADER_SIZE): a larger length is not a header.
constexpr uint64_t kMaxHeader = 100'000'000;

std::map<std::string, Tensor> parse_safetensors(std::string_view b, const std::string& what) {
  if (b.size() < 8) fail(what, "the file is truncated: " + std::to_string(b.size()) + " bytes, the header length alone takes 8");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
  if (n > kMaxHeader)
    fail(what, "the header length " + std::to_string(n) + " is over safetensors' limit of " +
                   std::to_string(kMaxHeader) + " bytes: not a safetensors file, or a corrupt one");
  if (n > b.size() - 8)
    fail(what, "the header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(b.size() - 8) + " bytes follow it): truncated, or not a safetensors file");
  json h = parse_header(b.substr(8, static_cast<size_t>(n)), what);
  if (!h.is_object()) fail(what, "the header is JSON but not an object");
  const std::string_view data = b.substr(8 + static_cast<size_t>(n));
  std::map<std::string, Tensor> out;
  std::vector<Extent> extents;
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) fail(what, "__metadata__ is not an object");
      continue;
    }
    if (!e.is_object()) fail(what, "tensor '" + name + "': its entry is not an object");
    for (const char* f : {"dtype", "shape", "data_offsets"})
      if (!e.contains(f)) fail(what, "tensor '" + name + "' has no '" + f + "'");
    const json& jd = e["dtype"];
    if (!jd.is_string()) fail(what, "tensor '" + name + "': dtype is not a string");
    const std::string code = jd.get<std::string>();
    const Code* found = nullptr;
    for (const Code& c : kCodes)
      if (code == c.name) found = &c;
    if (!found)
      fail(what, "tensor '" + name + "' has dtype " + code +
                     ", which kiln does not have (it reads F32 F64 F16 BF16 I16 I32 I64 U8 U16 U32 U64 I8 BOOL)");
    const json& js = e["shape"];
    if (!js.is_array()) fail(what, "tensor '" + name + "': shape is not an array");
    Shape shape;
    for (const json& d : js) {
      uint64_t v = non_negative(d, what, name, "shape");
      if (v > static_cast<uint64_t>(INT64_MAX)) fail(what, "tensor '" + name + "': an extent is too large");
      shape.push_back(static_cast<int64_t>(v));
    }
    int64_t numel;
    try {
      numel = checked_numel(shape, "read_safetensors");
    } catch (const Error&) {
      fail(what, "tensor '" + name + "': shape " + shape_str(shape) + " has too many elements");
    }
    const json& jo = e["data_offsets"];
    if (!jo.is_array() || jo.size() != 2) fail(what, "tensor '" + name + "': data_offsets is not [begin, end]");
    const uint64_t begin = non_negative(jo[0], what, name, "data_offsets"),
                   end = non_negative(jo[1], what, name, "data_offsets");
    if (begin > end || end > data.size())
      fail(what, "tensor '" + name + "': data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] lie outside the " + std::to_string(data.size()) + " data bytes" +
                     (end > data.size() ? " (the file may be truncated)" : ""));
    const size_t isz = size_of(found->dtype);
    if (static_cast<uint64_t>(numel) > (end - begin) / isz || static_cast<uint64_t>(numel) * isz != end - begin)
      fail(what, "tensor '" + name + "': shape " + shape_str(shape) + " of " + code + " needs " +
                     std::to_string(numel) + " x " + std::to_string(isz) + " bytes, data_offsets give " +
                     std::to_string(end - begin));
    const char* src = data.data() + begin;
    const size_t nbytes = static_cast<size_t>(end - begin);
    if (found->dtype == DType::bool_)
      for (size_t i = 0; i < nbytes; ++i)
        if (static_cast<uint8_t>(src[i]) > 1)
          fail(what, "tensor '" + name + "': bool element " + std::to_string(i) + " is not 0 or 1");
    Tensor t = Tensor::empty(shape, found->dtype);
    if (nbytes) std::memcpy(t.data_ptr(), src, nbytes);
    out.emplace(name, std::move(t));
    extents.push_back({begin, end, name});
  }
  check_tiling(std::move(extents), data.size(), what);
  return out;
}

std::map<std::string, Tensor> read_safetensors(const std::string& path) {
  // The header length is checked on the first 8 bytes and only what the
  // header declares is read (tester t17 F4: /dev/zero was read whole first).
  auto want = [&](std::string_view b) -> uint64_t {
    if (b.size() < 8) return 8;
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
    if (n > kMaxHeader)
      fail(path, "the header length " + std::to_string(n) + " is over safetensors' limit of " +
                     std::to_string(kMaxHeader) + " bytes: not a safetensors file, or a corrupt one");
    if (b.size() < 8 + n) return 8 + n;
    const json h = parse_header(b.substr(8, static_cast<size_t>(n)), path);
    uint64_t end = 0;  // the largest data offset declared; a malformed entry is parse_safetensors' to report
    if (h.is_object())
      for (const auto& [name, e] : h.items())
        if (e.is_object() && e.contains("data_offsets") && e["data_offsets"].is_array() &&
            e["data_offsets"].size() == 2 && e["data_offsets"][1].is_number_unsigned())
          end = std::max(end, e["data_offsets"][1].get<uint64_t>());
    return 8 + n + std::min(end, UINT64_MAX - 8 - n);
  };
  return parse_safetensors(io_detail::read_file_bytes_bounded(path, "read_safetensors", want), path);
}

std::string encode_safetensors(const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::vector<Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) throw IoError("write_safetensors: a tensor has an empty name");
    if (name == "__metadata__") throw IoError("write_safetensors: '__metadata__' is reserved, not a tensor name");
    if (!t.defined()) throw IoError("write_safetensors: tensor '" + name + "' is undefined");
    if (!t.device().is_cpu())
      throw IoError("write_safetensors: tensor '" + name + "' is on " + t.device().str() + "; copy it to the CPU first");
    Tensor c = t.contiguous();
    const uint64_t nb = static_cast<uint64_t>(c.numel()) * c.itemsize();
    h[name] = {{"dtype", code_of(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, offset + nb}}};
    offset += nb;
    data.push_back(std::move(c));
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out;
  out.reserve(8 + header.size() + offset);
  for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xff);
  out += header;
  for (const Tensor& c : data)
    if (c.numel()) out.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.itemsize());
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  io_detail::write_file_bytes(path, encode_safetensors(tensors, metadata), "write_safetensors");
}

}  // namespace kiln
