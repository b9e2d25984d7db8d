// MEF encoding and decoding (format in mef.h). Decoding trusts nothing: every
// length is compared with the bytes that remain before it is used, so no read
// leaves the buffer and no allocation is larger than the file.
#include "mef.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <iterator>
#include <map>
#include <set>

#include "../backends/cpu/jit/small_gemm.h"
#include "../trace/treedef_io.h"
#include "mef_crc.h"
#include "mef_graph.h"
#include "mef_io.h"
#include "mef_plan.h"
#include "plan.h"

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "0.1.0"
#endif

namespace kiln::mef {

namespace {

constexpr size_t kHeaderBytes = 24;  // magic, version, total length, section count
constexpr size_t kSectionHeaderBytes = 12;  // tag, payload length
constexpr size_t kChecksumBytes = 4;

const char* section_desc(std::string_view tag) {
  if (tag == "META") return "the writer";
  if (tag == "GRPH") return "the optimised graph";
  if (tag == "GRPB") return "the optimised graph, binary";
  if (tag == "SIGN") return "the signature";
  if (tag == "WGTS") return "the weight list";
  if (tag == "SRCG") return "the source graph";
  if (tag == "MUTW") return "the write-backs of in-place updates";
  if (tag == "CODE") return "the generated machine code";
  if (tag == "PLAN") return "the execution plan";
  if (tag == "CUBN") return "the compiled CUDA module";
  return "unknown to this kiln";
}


}  // namespace

namespace io {
std::string tag_str(std::string_view tag) {
  std::string r;
  for (char c : tag) r += (c >= 32 && c < 127) ? c : '?';
  return "'" + r + "' (" + section_desc(tag) + ")";
}

void fail(const std::string& what, const std::string& msg) {
  throw ValueError("engine::read: '" + what + "': " + msg);
}
}  // namespace io

namespace {
using namespace io;

// Smallest encoded layout / weight: dtype, device type, index, (stride class), rank.
constexpr size_t kMinLayoutBytes = 11;
constexpr size_t kMinWeightBytes = 14;

engine::Signature decode_signature(Cursor& c) {
  engine::Signature s;
  uint32_t n = c.count("the argument count", kMinLayoutBytes);
  for (uint32_t i = 0; i < n; ++i) s.in_layouts.push_back(c.layout());
  s.in_tree = c.tree("the argument tree");
  uint32_t m = c.count("the result count", kMinLayoutBytes);
  for (uint32_t i = 0; i < m; ++i) s.out_layouts.push_back(c.layout());
  s.out_tree = c.tree("the result tree");
  c.end();
  return s;
}

// MUTW: count, then per write-back an i32 argument index (-1: a weight) and a weight name.
std::vector<WriteBack> decode_writes(Cursor& c) {
  std::vector<WriteBack> w;
  uint32_t n = c.count("the write-back count", 8);
  for (uint32_t i = 0; i < n; ++i) {
    WriteBack b;
    b.argument = static_cast<int32_t>(c.u32("a write-back's argument"));
    b.weight = c.str("a write-back's weight name");
    if ((b.argument < 0) == b.weight.empty())
      c.bad("a write-back that names both or neither of an argument and a weight");
    w.push_back(std::move(b));
  }
  c.end();
  return w;
}

std::vector<std::pair<std::string, TensorType>> decode_weights(Cursor& c) {
  std::vector<std::pair<std::string, TensorType>> w;
  uint32_t n = c.count("the weight count", kMinWeightBytes);
  for (uint32_t i = 0; i < n; ++i) {
    std::string name = c.str("a weight name");
    if (name.empty()) c.bad("a weight without a name");
    TensorType t;
    t.dtype = c.dtype();
    t.device = c.device();
    t.shape = c.shape();
    w.emplace_back(std::move(name), std::move(t));
  }
  c.end();
  return w;
}

// CODE (see mef.h).
Contents::Code decode_code(Cursor& c) {
  Contents::Code code;
  code.feature_key = c.str("the feature key");
  if (code.feature_key.empty()) c.bad("an empty feature key");
  // program str, hash, bytes str, relocation count: at least 20 bytes each
  uint32_t n = c.count("the kernel count", 20);
  for (uint32_t i = 0; i < n; ++i) {
    Contents::Code::Kernel k;
    k.program = c.str("a kernel's program");
    k.hash = c.u64("a kernel's hash");
    k.image.bytes = c.str("a kernel's code");
    uint32_t r = c.count("a kernel's relocation count", 8);
    for (uint32_t j = 0; j < r; ++j) {
      codegen::CodeImage::Reloc rel;
      rel.offset = c.u32("a relocation's offset");
      rel.callee = c.u32("a relocation's callee");
      k.image.relocs.push_back(rel);
    }
    code.kernels.push_back(std::move(k));
  }
  c.end();
  return code;
}

std::string encode_code(const Contents::Code& code) {
  std::string o;
  put_str(o, code.feature_key);
  put_u32(o, static_cast<uint32_t>(code.kernels.size()));
  for (const auto& k : code.kernels) {
    put_str(o, k.program);
    put_u64(o, k.hash);
    put_str(o, k.image.bytes);
    put_u32(o, static_cast<uint32_t>(k.image.relocs.size()));
    for (const auto& r : k.image.relocs) {
      put_u32(o, r.offset);
      put_u32(o, r.callee);
    }
  }
  return o;
}

uint64_t fnv1a_bytes(std::string_view b) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : b) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// CUBN (see mef.h).
std::string encode_cubin(const codegen::StoredModule& m) {
  std::string o;
  put_str(o, m.feature_key);
  put_u64(o, m.source_hash);
  put_str(o, m.image_arch);
  put_u8(o, m.is_cubin ? 1 : 0);
  put_u32(o, static_cast<uint32_t>(m.kernels.size()));
  for (const auto& k : m.kernels) {
    put_str(o, k.name);
    put_u32(o, static_cast<uint32_t>(k.registers));
    put_u32(o, static_cast<uint32_t>(k.spill_store_bytes));
    put_u32(o, static_cast<uint32_t>(k.spill_load_bytes));
  }
  put_str(o, std::string_view(m.image.data(), m.image.size()));
  put_u64(o, fnv1a_bytes(o));
  return o;
}

codegen::StoredModule decode_cubin(Cursor& c) {
  codegen::StoredModule m;
  m.feature_key = c.str("the feature key");
  if (m.feature_key.empty()) c.bad("an empty feature key");
  m.source_hash = c.u64("the source hash");
  m.image_arch = c.str("the image's architecture");
  const uint8_t kind = c.u8("the image kind");
  if (kind > 1) c.bad("image kind " + std::to_string(kind) + " (expected 0: PTX or 1: cubin)");
  m.is_cubin = kind == 1;
  const uint32_t nk = c.count("the kernel count", 16);  // name str, three u32
  for (uint32_t i = 0; i < nk; ++i) {
    cuda::KernelResources k;
    k.name = c.str("a kernel's name");
    k.registers = static_cast<int>(c.u32("a kernel's register count"));
    k.spill_store_bytes = static_cast<int>(c.u32("a kernel's spill stores"));
    k.spill_load_bytes = static_cast<int>(c.u32("a kernel's spill loads"));
    m.kernels.push_back(std::move(k));
  }
  const std::string image = c.str("the image");
  if (image.empty()) c.bad("an empty image");
  m.image.assign(image.begin(), image.end());
  const size_t checked = c.pos;
  const uint64_t check = c.u64("the check value");
  c.end();
  if (fnv1a_bytes(c.s.substr(0, checked)) != check) c.bad("the check value does not match the section (corrupted)");
  return m;
}

}  // namespace

Contents::Code code_of(const codegen::ExecutionPlan& plan) {
  Contents::Code code;
  code.feature_key = plan.code_feature_key();
  std::set<std::string> seen;
  auto add = [&](std::string text, const codegen::CodeImage& image) {
    if (image.bytes.empty() || !seen.insert(text).second) return;
    Contents::Code::Kernel k;
    k.program = std::move(text);
    k.image = image;
    k.hash = k.image.hash(code.feature_key + '\n' + k.program);
    code.kernels.push_back(std::move(k));
  };
  std::set<const void*> gemms;  // each generated GEMM once (its key printed once)
  for (const codegen::PlanStep& s : plan.steps()) {
    if (s.kernel) add(*s.program, s.kernel->image());
    if (s.small_gemm && gemms.insert(s.small_gemm.get()).second) add(s.small_gemm->key().str(), s.small_gemm->image());
    if (s.gemm.small && gemms.insert(s.gemm.small.get()).second) add(s.gemm.small->key().str(), s.gemm.small->image());
  }
  return code;
}

codegen::CodeImages usable_images(const Contents& c, const std::string& key, std::string* note) {
  codegen::CodeImages images;
  std::string why;
  if (c.code.feature_key.empty()) {
    why = c.code_note.empty() ? "the file has no generated code" : c.code_note;
  } else if (c.code.feature_key != key) {
    why = "the file's code was generated for '" + c.code.feature_key + "', this kiln generates for '" + key + "'";
  } else {
    for (const auto& k : c.code.kernels) {
      if (k.image.hash(key + '\n' + k.program) != k.hash) {
        why = "the code of a kernel does not match its hash (corrupted)";
        continue;
      }
      images.emplace(k.program, k.image);
    }
  }
  if (note) *note = why;
  return images;
}

std::string writer_string() { return std::string("kiln ") + KILN_VERSION_STRING; }

std::string encode_signature(const engine::Signature& s) {
  std::string o;
  put_u32(o, static_cast<uint32_t>(s.in_layouts.size()));
  for (const auto& l : s.in_layouts) put_layout(o, l);
  put_str(o, serialize(s.in_tree));
  put_u32(o, static_cast<uint32_t>(s.out_layouts.size()));
  for (const auto& l : s.out_layouts) put_layout(o, l);
  put_str(o, serialize(s.out_tree));
  return o;
}

std::string encode_weights(const std::vector<std::pair<std::string, TensorType>>& w) {
  std::string o;
  put_u32(o, static_cast<uint32_t>(w.size()));
  for (const auto& [name, t] : w) {
    put_str(o, name);
    put_type(o, t.dtype, t.device, t.shape);
  }
  return o;
}

std::string encode_sections(uint32_t version, const std::vector<std::pair<std::string, std::string>>& sections) {
  std::string o(kMagic, sizeof kMagic);
  put_u32(o, version);
  size_t total = kHeaderBytes + kChecksumBytes;
  for (const auto& [tag, payload] : sections) total += kSectionHeaderBytes + payload.size();
  put_u64(o, total);
  put_u32(o, static_cast<uint32_t>(sections.size()));
  o.reserve(total);
  for (const auto& [tag, payload] : sections) {
    if (tag.size() != 4) throw ValueError("mef::encode_sections: a section tag has 4 characters, got '" + tag + "'");
    o += tag;
    put_u64(o, payload.size());
    o += payload;
  }
  put_u32(o, crc32_of(o));
  return o;
}

void reseal(std::string& b) {
  if (b.size() < kHeaderBytes + kChecksumBytes) return;
  std::string len;
  put_u64(len, b.size());
  b.replace(12, 8, len);
  std::string crc;
  put_u32(crc, crc32_of(std::string_view(b).substr(0, b.size() - kChecksumBytes)));
  b.replace(b.size() - kChecksumBytes, kChecksumBytes, crc);
}

std::string encode(const Contents& c) {
  std::vector<std::pair<std::string, std::string>> s;
  s.emplace_back("META", c.writer.empty() ? writer_string() : c.writer);
  s.emplace_back("GRPH", c.graph_text);
  if (!c.graph_binary.empty()) s.emplace_back("GRPB", c.graph_binary);
  s.emplace_back("SIGN", encode_signature(c.signature));
  s.emplace_back("WGTS", encode_weights(c.weights));
  if (!c.source_text.empty()) s.emplace_back("SRCG", c.source_text);
  if (!c.signature.writes.empty()) {
    std::string w;
    put_u32(w, static_cast<uint32_t>(c.signature.writes.size()));
    for (const WriteBack& b : c.signature.writes) {
      put_u32(w, static_cast<uint32_t>(b.argument));
      put_str(w, b.weight);
    }
    s.emplace_back("MUTW", std::move(w));
  }
  if (!c.code.feature_key.empty()) s.emplace_back("CODE", encode_code(c.code));
  if (!c.plan.empty()) s.emplace_back("PLAN", c.plan);
  if (!c.cubin.image.empty()) s.emplace_back("CUBN", encode_cubin(c.cubin));
  return encode_sections(kFormatVersion, s);
}

Contents decode(std::string_view b, const std::string& what, bool for_build) {
  const std::string_view magic(kMagic, sizeof kMagic);
  const size_t size = b.size();
  if (size == 0) fail(what, "the file is empty, not a MEF file");
  if (b.substr(0, std::min(size, magic.size())) != magic.substr(0, std::min(size, magic.size())))
    fail(what, "not a MEF file (it does not start with the MEF magic \"KILNMEF\\0\")");
  auto truncated_header = [&] {
    fail(what, "the file is truncated: it ends inside the header (" + std::to_string(size) + " of " +
                   std::to_string(kHeaderBytes) + " bytes)");
  };
  if (size < 12) truncated_header();
  Contents c;
  c.format_version = get_u32_at(b, 8);
  if (c.format_version == 0) fail(what, "invalid format version 0 (the file is corrupted)");
  if (c.format_version > kFormatVersion) {
    // A newer kiln's file still has this header (magic, version, total
    // length) and ends in the CRC-32 of everything before it; a version
    // field damaged in a file of a version this kiln reads fails that
    // check. Blame the version only for a file that is otherwise intact.
    char v[48];
    std::snprintf(v, sizeof v, "%u (0x%08x)", static_cast<unsigned>(c.format_version),
                  static_cast<unsigned>(c.format_version));
    const std::string odd = std::string("its format version field reads ") + v + ", newer than the " +
                            std::to_string(kFormatVersion) + " this kiln reads, ";
    if (size < kHeaderBytes + kChecksumBytes)
      fail(what, "the file is truncated or corrupted: " + odd + "and it has only " + std::to_string(size) +
                     " bytes, fewer than any MEF file's header and checksum");
    const uint64_t total = get_u64_at(b, 12);
    if (total != size)
      fail(what, "the file is corrupted: " + odd + "and its header gives a total length of " + std::to_string(total) +
                     " bytes for a file of " + std::to_string(size));
    const uint32_t stored = get_u32_at(b, size - kChecksumBytes),
                   computed = crc32_of(b.substr(0, size - kChecksumBytes));
    if (stored != computed) {
      char buf[112];
      std::snprintf(buf, sizeof buf, "and its checksum does not match (stored 0x%08x, computed 0x%08x)",
                    static_cast<unsigned>(stored), static_cast<unsigned>(computed));
      fail(what, "the file is corrupted: " + odd + buf + "; a file a newer kiln wrote would pass the checksum");
    }
    fail(what, "written by a newer kiln: format version " + std::to_string(c.format_version) +
                   ", this kiln reads up to " + std::to_string(kFormatVersion) + "; upgrade kiln to read it");
  }
  if (size < kHeaderBytes) truncated_header();
  const uint64_t total = get_u64_at(b, 12);
  const uint32_t nsec = get_u32_at(b, 20);
  if (total < kHeaderBytes + kChecksumBytes)
    fail(what, "the header is corrupted: it gives a total length of " + std::to_string(total) + " bytes");
  if (size < total) {
    // Name the section the file ends in.
    std::string where = "before the checksum";
    size_t pos = kHeaderBytes;
    for (uint32_t i = 0; i < nsec; ++i) {
      if (size - pos < kSectionHeaderBytes) {
        where = "inside the header of section " + std::to_string(i + 1) + " of " + std::to_string(nsec);
        break;
      }
      const std::string_view tag = b.substr(pos, 4);
      const uint64_t len = get_u64_at(b, pos + 4);
      pos += kSectionHeaderBytes;
      if (len > size - pos) {
        where = "inside section " + tag_str(tag) + " (" + std::to_string(size - pos) + " of its " +
                std::to_string(len) + " bytes are there)";
        break;
      }
      pos += static_cast<size_t>(len);
    }
    if (where == "before the checksum" && size - pos > 0) where = "inside the checksum";
    fail(what, "the file is truncated: it has " + std::to_string(size) + " of its " + std::to_string(total) +
                   " bytes and ends " + where);
  }
  if (size > total)
    fail(what, "the file has " + std::to_string(size - total) + " bytes after its end (its header gives " +
                   std::to_string(total) + " bytes); it is corrupted or has something appended");
  const size_t body = static_cast<size_t>(total) - kChecksumBytes;
  const uint32_t stored = get_u32_at(b, body), computed = crc32_of(b.substr(0, body));
  if (stored != computed) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "checksum mismatch (stored 0x%08x, computed 0x%08x): the file is corrupted",
                  static_cast<unsigned>(stored), static_cast<unsigned>(computed));
    fail(what, buf);
  }
  // The section table must tile [header, checksum) exactly.
  std::map<std::string, std::string_view, std::less<>> found;
  size_t pos = kHeaderBytes;
  for (uint32_t i = 0; i < nsec; ++i) {
    if (body - pos < kSectionHeaderBytes)
      fail(what, "the section table is malformed: section " + std::to_string(i + 1) + " of " + std::to_string(nsec) +
                     " starts past the last byte");
    std::string tag(b.substr(pos, 4));
    const uint64_t len = get_u64_at(b, pos + 4);
    pos += kSectionHeaderBytes;
    if (len > body - pos)
      fail(what, "the section table is malformed: section " + tag_str(tag) + " claims " + std::to_string(len) +
                     " bytes, " + std::to_string(body - pos) + " remain");
    std::string_view payload = b.substr(pos, static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    if (std::string_view(section_desc(tag)) == "unknown to this kiln") continue;  // a later kiln's optional section
    if (found.count(tag)) fail(what, "section " + tag_str(tag) + " appears twice");
    found[tag] = payload;
  }
  if (pos != body)
    fail(what, "the section table is malformed: " + std::to_string(body - pos) +
                   " bytes lie between the last section and the checksum");
  for (const char* req : {"GRPH", "SIGN", "WGTS"})
    if (!found.count(req)) fail(what, "the file has no section " + tag_str(req));
  if (found.count("META")) c.writer = std::string(found["META"]);
  if (found.count("GRPB")) c.graph_binary = std::string(found["GRPB"]);
  if (!for_build || c.graph_binary.empty() || graph_binary_layout(c.graph_binary) != kGraphLayoutVersion)
    c.graph_text = std::string(found["GRPH"]);
  if (found.count("SRCG")) c.source_text = std::string(found["SRCG"]);
  if (found.count("PLAN")) c.plan = std::string(found["PLAN"]);
  {
    Cursor cur{found["SIGN"], 0, "SIGN", what};
    c.signature = decode_signature(cur);
  }
  {
    Cursor cur{found["WGTS"], 0, "WGTS", what};
    c.weights = decode_weights(cur);
  }
  if (found.count("MUTW")) {
    Cursor cur{found["MUTW"], 0, "MUTW", what};
    c.signature.writes = decode_writes(cur);
  }
  if (found.count("CODE")) {
    // Optional and only an acceleration: a malformed one is ignored (the
    // code is generated from the graph), with the reason kept.
    Cursor cur{found["CODE"], 0, "CODE", what};
    try {
      c.code = decode_code(cur);
    } catch (const Error& e) {
      c.code = Contents::Code{};
      c.code_note = e.what();
    }
  }
  if (found.count("CUBN")) {
    // Optional too: a damaged module is ignored and compiled from the graph.
    Cursor cur{found["CUBN"], 0, "CUBN", what};
    try {
      c.cubin = decode_cubin(cur);
    } catch (const Error& e) {
      c.cubin = codegen::StoredModule{};
      c.cubin_note = e.what();
    }
  }
  return c;
}

namespace {

std::shared_ptr<Graph> parse_graph_section(const std::string& text, const char* which, const std::string& what) {
  try {
    return std::shared_ptr<Graph>(Graph::parse(text));
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind("verify:", 0) == 0) fail(what, std::string(which) + " fails verification: " + msg);
    fail(what, std::string(which) + " does not parse: " + msg);
  }
}

std::string mismatch(const std::string& what_sig, const std::string& a, const std::string& b) {
  return "the signature does not match the graph: " + what_sig + " is " + a + " in the signature but " + b +
         " in the graph";
}

}  // namespace

std::shared_ptr<const engine::CompiledModel> build(const Contents& c, const KernelOptions& options,
                                                   const std::string& what) {
  const bool binary = !c.graph_binary.empty() && graph_binary_layout(c.graph_binary) == kGraphLayoutVersion;
  std::shared_ptr<Graph> g = binary ? decode_graph_binary(c.graph_binary, what)
                                    : parse_graph_section(c.graph_text, "the graph section", what);
  if (!g->subgraphs().empty())
    fail(what, "the graph section is not flat: it defines subgraphs (a MEF holds the optimised, inlined graph)");
  // (the GRPB decoder checked each type's element count as it read it)
  for (size_t v = 0; !binary && v < g->num_values(); ++v) {
    try {
      checked_numel(g->type(static_cast<int32_t>(v)).shape);
    } catch (const Error&) {
      fail(what, "the graph section has value %" + std::to_string(v) + " of shape " +
                     shape_str(g->type(static_cast<int32_t>(v)).shape) + ", whose element count overflows");
    }
  }
  const engine::Signature& s = c.signature;
  const auto& ins = g->input_ids();
  const auto& outs = g->output_ids();
  if (s.in_layouts.size() != ins.size())
    fail(what, mismatch("the argument count", std::to_string(s.in_layouts.size()), std::to_string(ins.size())));
  for (size_t i = 0; i < ins.size(); ++i)
    if (!(TensorType(s.in_layouts[i]) == g->type(ins[i])))
      fail(what, mismatch("argument " + std::to_string(i), TensorType(s.in_layouts[i]).str(), g->type(ins[i]).str()));
  if (s.out_layouts.size() != outs.size())
    fail(what, mismatch("the result count", std::to_string(s.out_layouts.size()), std::to_string(outs.size())));
  for (size_t i = 0; i < outs.size(); ++i)
    if (!(TensorType(s.out_layouts[i]) == g->type(outs[i])))
      fail(what, mismatch("result " + std::to_string(i), TensorType(s.out_layouts[i]).str(), g->type(outs[i]).str()));
  if (s.in_tree.num_leaves() != s.in_layouts.size())
    fail(what, "the signature is inconsistent: the argument tree " + s.in_tree.str() + " has " +
                   std::to_string(s.in_tree.num_leaves()) + " tensor leaves for " +
                   std::to_string(s.in_layouts.size()) + " argument layouts");
  if (s.writes.size() > s.out_layouts.size())
    fail(what, "the signature is inconsistent: " + std::to_string(s.writes.size()) + " write-backs for " +
                   std::to_string(s.out_layouts.size()) + " results");
  for (const WriteBack& w : s.writes) {
    if (w.argument >= static_cast<int32_t>(s.in_layouts.size()))
      fail(what, "a write-back names argument " + std::to_string(w.argument) + " of " +
                     std::to_string(s.in_layouts.size()));
    if (w.argument >= 0 && !(TensorType(s.in_layouts[w.argument]) ==
                             TensorType(s.out_layouts[s.out_layouts.size() - s.writes.size() + (&w - s.writes.data())])))
      fail(what, "a write-back into argument " + std::to_string(w.argument) + " has another type than the argument");
  }
  if (s.out_tree.num_leaves() + s.writes.size() != s.out_layouts.size())
    fail(what, "the signature is inconsistent: the result tree " + s.out_tree.str() + " has " +
                   std::to_string(s.out_tree.num_leaves()) + " tensor leaves for " +
                   std::to_string(s.out_layouts.size()) + " result layouts");
  std::vector<std::pair<std::string, TensorType>> graph_weights;
  for (const Node& n : g->nodes())
    if (n.kind == NodeKind::weight) graph_weights.emplace_back(n.name, g->type(n.outputs[0]));
  if (graph_weights != c.weights) {
    std::string a, b;
    for (const auto& [n, t] : c.weights) a += (a.empty() ? "" : ", ") + n + ": " + t.str();
    for (const auto& [n, t] : graph_weights) b += (b.empty() ? "" : ", ") + n + ": " + t.str();
    fail(what, "the weight list does not match the graph: the file lists {" + a + "}, the graph reads {" + b + "}");
  }
  std::shared_ptr<const Graph> source = g;
  if (!c.source_text.empty()) {
    std::shared_ptr<Graph> sg = parse_graph_section(c.source_text, "the source graph section", what);
    bool same = sg->input_ids().size() == ins.size() && sg->output_ids().size() == outs.size();
    for (size_t i = 0; same && i < ins.size(); ++i) same = sg->type(sg->input_ids()[i]) == g->type(ins[i]);
    for (size_t i = 0; same && i < outs.size(); ++i) same = sg->type(sg->output_ids()[i]) == g->type(outs[i]);
    if (!same) fail(what, "the source graph's inputs or results differ from the optimised graph's");
    source = sg;
  }
  std::shared_ptr<codegen::ExecutionPlan> plan;
  codegen::CodeImages images;
  if (!c.code.feature_key.empty() && !options.dump)
    images = usable_images(c, codegen::codegen_feature_key(codegen::detect_cpu_target(), options.strict), nullptr);
  std::string note;
  if (c.plan.empty())
    note = "the file has no PLAN section";
  else if (options.dump)
    note = "KILN_JIT_DUMP is on (the plan is made again to print it)";
  else
    note = plan_mismatch(c.plan, options, what);
  if (note.empty()) {
    plan = decode_plan(c.plan, g, options, images.empty() ? nullptr : &images, what);
  } else {
    try {
      plan = std::make_shared<codegen::ExecutionPlan>(g, options, images.empty() ? nullptr : &images);
    } catch (const Error& e) {
      fail(what, std::string("cannot plan the graph: ") + e.what());
    }
    plan->set_read_note("planned on reading: " + note);
  }
  engine::MefOrigin origin{what, c.format_version, c.writer};
  auto model = std::make_shared<engine::CompiledModel>(source, g, plan, std::make_shared<const engine::Signature>(s),
                                                       std::move(origin));
  int dev = -1;
  try {
    dev = codegen::cuda_device_of(*g);
  } catch (const Error& e) {
    fail(what, std::string("cannot plan the graph: ") + e.what());
  }
  if (dev >= 0) {
    // A CUDA graph: its CUDA plan, with the file's compiled module when it
    // was compiled under this process's feature key from the same source.
    std::shared_ptr<const codegen::CudaExecutable> cx;
    try {
      cx = std::make_shared<const codegen::CudaExecutable>(g, options, dev, c.cubin.image.empty() ? nullptr : &c.cubin);
    } catch (const Error& e) {
      fail(what, std::string("cannot plan the graph for cuda:") + std::to_string(dev) + ": " + e.what());
    }
    model->set_cuda_plan(std::move(cx));
  }
  return model;
}

namespace {
// What the file at `p` is, for a message ("a FIFO", "a character device", ...).
const char* file_kind(std::filesystem::file_type t) {
  using ft = std::filesystem::file_type;
  switch (t) {
    case ft::fifo: return "a FIFO";
    case ft::character: return "a character device";
    case ft::block: return "a block device";
    case ft::socket: return "a socket";
    case ft::directory: return "a directory";
    default: return "not a regular file";
  }
}
}  // namespace

void write_file_atomically(const std::string& path_in, const std::string& bytes, const std::string& op) {
  namespace fs = std::filesystem;
  // Checked before the temporary file is written, so a bad path leaves no
  // '<path>.tmp' behind and the message names the path, not the rename.
  if (path_in.empty()) throw ValueError(op + ": the path is empty (expected the path of the file to write)");
  std::error_code ec;
  if (fs::is_directory(path_in, ec))
    throw ValueError(op + ": '" + path_in + "' is a directory (expected the path of a file, e.g. a name inside it)");
  // A symbolic link is followed (a chain too, a dangling one included): the
  // file is written where it points, so the link stays and its target gets
  // the new contents; renaming over the link itself would replace it.
  fs::path target = path_in;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    if (hops == 40) throw ValueError(op + ": '" + path_in + "': too many levels of symbolic links");
    fs::path next = fs::read_symlink(target, ec);
    if (ec) throw ValueError(op + ": cannot read the symbolic link '" + target.string() + "': " + ec.message());
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const std::string path = target.string();
  // A FIFO, a device or a socket is not replaced by a regular file (renaming
  // over /dev/full would replace the device node itself).
  const fs::file_status st = fs::status(target, ec);
  const bool exists = !ec && fs::exists(st);
  if (exists && !fs::is_regular_file(st))
    throw ValueError(op + ": '" + path_in + "'" + (path != path_in ? " (a link to '" + path + "')" : std::string()) +
                     " is " + file_kind(st.type()) +
                     ", not a regular file; refusing to replace it (expected the path of a regular file to write)");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) {
      // Name the path the caller gave (the '.tmp' beside it is ours); a missing
      // folder is the usual cause.
      const int err = errno;
      const fs::path dir = target.parent_path();
      if (!dir.empty() && !fs::is_directory(dir, ec))
        throw ValueError(op + ": cannot write '" + path_in + "': the folder '" + dir.string() +
                         "' does not exist (expected an existing folder)");
      throw ValueError(op + ": cannot write '" + path_in + "' (opening its temporary file '" + tmp +
                       "' failed): " + std::strerror(err));
    }
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw ValueError(op + ": writing '" + tmp + "' failed: " + std::strerror(errno));
    }
  }
  // The file replaced keeps its permissions.
  if (exists) fs::permissions(tmp, st.permissions(), fs::perm_options::replace, ec);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw ValueError(op + ": cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(err));
  }
}

}  // namespace kiln::mef

// ---- engine::read ------------------------------------------------------------------------

namespace kiln::engine {

std::shared_ptr<const CompiledModel> read_bytes(std::string_view bytes, const std::string& what,
                                                std::shared_ptr<InferenceSession> session) {
  if (!session) session = InferenceSession::default_session();
  mef::Contents c = mef::decode(bytes, what, true);
  return mef::build(c, session->options(), what);
}

namespace {
// Reads a MEF file's bytes from `in`, looking at the header first: a stream
// that does not start with the magic (or ends inside the header) is not read
// further. Then, with `whole` (a regular file: its size bounds the read),
// the rest; otherwise (a pipe, a device, a std::istream) at most the total
// length the header gives, so a stream that never ends (/dev/zero, a pipe)
// costs at most that; one that goes on after it is refused. `what` names
// the file in errors.
std::string read_bounded(std::istream& in, const std::string& what, bool whole) {
  auto failed = [&] {
    return ValueError("engine::read: '" + what + "': reading the file failed: " + std::strerror(errno));
  };
  std::string b(mef::kHeaderBytes, '\0');
  in.read(b.data(), static_cast<std::streamsize>(b.size()));
  b.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) throw failed();
  const std::string_view magic(mef::kMagic, sizeof mef::kMagic);
  if (b.size() < mef::kHeaderBytes || std::string_view(b).substr(0, magic.size()) != magic)
    return b;  // decode() names the problem: empty, not a MEF file, or truncated inside the header
  const uint64_t total = mef::io::get_u64_at(b, 12);
  const uint64_t want = whole ? UINT64_MAX : std::max<uint64_t>(total, b.size()) + 1;
  char chunk[1 << 16];
  while (b.size() < want && in) {
    const uint64_t n = std::min<uint64_t>(sizeof chunk, want - b.size());
    in.read(chunk, static_cast<std::streamsize>(n));
    b.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw failed();
  if (!whole && b.size() > total && total >= mef::kHeaderBytes)
    throw ValueError("engine::read: '" + what + "': the data goes on after the end of the MEF file (its header gives " +
                     std::to_string(total) + " bytes); it is corrupted or has something appended");
  return b;
}
}  // namespace

std::shared_ptr<const CompiledModel> read(std::istream& in, std::shared_ptr<InferenceSession> session) {
  std::string bytes = read_bounded(in, "<stream>", false);
  return read_bytes(bytes, "<stream>", std::move(session));
}

std::shared_ptr<const CompiledModel> read(const std::string& path, std::shared_ptr<InferenceSession> session) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ValueError("engine::read: '" + path + "' is a directory, expected a MEF file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ValueError("engine::read: cannot open '" + path + "': " + std::strerror(errno));
  std::string bytes;
  try {
    // Header first, then at most the length it gives: a device or pipe
    // (/dev/zero) is refused after its first bytes instead of read forever.
    bytes = read_bounded(f, path, std::filesystem::is_regular_file(path, ec));
  } catch (const std::ios_base::failure& e) {
    throw ValueError("engine::read: '" + path + "': reading the file failed: " + e.what());
  }
  return read_bytes(bytes, path, std::move(session));
}

}  // namespace kiln::engine
