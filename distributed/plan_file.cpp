#include "plan_file.h"

#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace kiln::distributed::detail {

namespace {

constexpr const char* kPlanMagic = "kiln distributed plan 2";
constexpr const char* kDeviceMagic = "kiln distributed device plan 2";

uint32_t crc_of(std::string_view b) {
  return static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(b.data()),
                                     static_cast<uInt>(b.size())));
}

std::string hex8(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

void put_layout(std::ostream& os, const DistributedLayout& l) {
  os << kiln::name(l.dtype) << " " << l.shape.size();
  for (int64_t e : l.shape) os << " " << e;
  for (const Placement& p : l.mapping.placements()) os << " " << p.str();
}

std::string with_checksum(std::string body, uint32_t* crc) {
  const uint32_t c = crc_of(body);
  if (crc) *crc = c;
  return body + "checksum " + hex8(c) + "\n";
}

void check_word(const std::string& w, const char* what) {
  if (w.empty() || w.find_first_of(" \t\r\n#") != std::string::npos)
    throw ValueError(std::string("DistributedCallable::export_mef: the ") + what + " '" + w +
                     "' is empty or contains whitespace or '#'; the plan file cannot spell it");
}

// One file's lines as token lists, read after its checksum was verified.
class Reader {
 public:
  Reader(const std::string& path, const char* magic) : path_(path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail("cannot open the file");
    const std::string b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (b.size() > (size_t{64} << 20)) fail("is " + std::to_string(b.size()) + " bytes; a plan file is far smaller");
    if (b.compare(0, std::string(magic).size(), magic) != 0)
      fail("does not start with '" + std::string(magic) + "' (not a kiln plan file of this version, or corrupted)");
    // The checksum line: the last line, "checksum <8 hex>\n".
    const size_t tail = std::string("checksum ").size() + 9;
    if (b.size() < tail || b.back() != '\n' || b.compare(b.size() - tail, 9, "checksum ") != 0 ||
        (b.size() > tail && b[b.size() - tail - 1] != '\n'))
      fail("the final 'checksum' line is missing: the file is truncated or corrupted");
    const std::string stored = b.substr(b.size() - 9, 8);
    if (stored.find_first_not_of("0123456789abcdef") != std::string::npos)
      fail("the checksum '" + stored + "' is not 8 hex digits: the file is corrupted");
    const uint32_t want = static_cast<uint32_t>(std::stoul(stored, nullptr, 16));
    checksum = crc_of(std::string_view(b).substr(0, b.size() - tail));
    if (want != checksum)
      fail("checksum mismatch (stored " + stored + ", computed " + hex8(checksum) + "): the file is corrupted");
    std::istringstream in(b.substr(0, b.size() - tail));
    std::string line;
    while (std::getline(in, line)) {
      const size_t hash = line.find('#');
      if (hash != std::string::npos) line.resize(hash);
      std::istringstream ls(line);
      std::vector<std::string> t;
      for (std::string w; ls >> w;) t.push_back(w);
      lines_.push_back(std::move(t));
    }
    line_ = 1;  // the magic line
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw ValueError("distributed::read: '" + path_ + "': " +
                     (line_ > 0 ? "line " + std::to_string(line_) + ": " : std::string()) + what);
  }
  // The next line, which must start with `key`; its tokens after the key.
  void expect(const std::string& key) {
    if (line_ >= lines_.size()) fail("expected a '" + key + "' line, the file ends");
    cur_ = lines_[line_++];
    pos_ = 0;
    if (cur_.empty() || cur_[0] != key) fail("expected a '" + key + "' line, got '" + (cur_.empty() ? "" : cur_[0]) + "'");
    pos_ = 1;
  }
  bool next_is(const std::string& key) const {
    return line_ < lines_.size() && !lines_[line_].empty() && lines_[line_][0] == key;
  }
  void end() {
    while (line_ < lines_.size() && lines_[line_].empty()) ++line_;
    if (line_ < lines_.size()) fail("unexpected line starting '" + lines_[line_][0] + "'");
  }
  std::string word(const char* what) {
    if (pos_ >= cur_.size()) fail(std::string("the line ends where ") + what + " was expected");
    return cur_[pos_++];
  }
  void keyword(const std::string& k) {
    const std::string w = word(("'" + k + "'").c_str());
    if (w != k) fail("expected '" + k + "', got '" + w + "'");
  }
  int64_t integer(const char* what, int64_t lo, int64_t hi) {
    const std::string w = word(what);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(w, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != w.size() || w.empty()) fail(std::string(what) + ": '" + w + "' is not an integer");
    if (v < lo || v > hi)
      fail(std::string(what) + " " + w + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }
  void line_done() {
    if (pos_ < cur_.size()) fail("unexpected '" + cur_[pos_] + "' at the end of the line");
  }
  // A call of a constructor that validates; its error gets the file and line.
  template <class F>
  auto checked(F f) -> decltype(f()) {
    try {
      return f();
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  std::vector<int32_t> ids(const char* what, int64_t num_values) {
    const int64_t n = integer(what, 0, num_values);
    std::vector<int32_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<int32_t>(integer("a value id", 0, num_values - 1)));
    return v;
  }
  Placement placement() {
    const std::string w = word("a placement");
    if (w == "Replicated") return Replicated();
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min})
      if (w == std::string("Partial(") + kiln::distributed::name(op) + ")") return Partial(op);
    if (w.size() > 9 && w.compare(0, 8, "Sharded(") == 0 && w.back() == ')') {
      const std::string n = w.substr(8, w.size() - 9);
      size_t used = 0;
      long long a = 0;
      try {
        a = std::stoll(n, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == n.size()) return Sharded(a);
    }
    fail("'" + w + "' is not a placement (Replicated, Sharded(<axis>), Partial(sum|max|min))");
  }
  DistributedLayout layout(const DeviceMesh& mesh) {
    const std::string dt = word("a dtype");
    const DType dtype = checked([&] { return dtype_from_name(dt); });
    const int64_t rank = integer("a rank", 0, 64);
    Shape shape;
    for (int64_t i = 0; i < rank; ++i) shape.push_back(integer("an extent", 0, int64_t{1} << 48));
    std::vector<Placement> ps;
    for (int64_t a = 0; a < mesh.ndim(); ++a) ps.push_back(placement());
    return checked([&] { return DistributedLayout(dtype, shape, DeviceMapping(mesh, ps)); });
  }

  uint32_t checksum = 0;

 private:
  std::string path_;
  std::vector<std::vector<std::string>> lines_;
  std::vector<std::string> cur_;
  size_t line_ = 0, pos_ = 0;
};

}  // namespace

std::string plan_text(const PlanFile& p, uint32_t* crc) {
  check_word(p.name, "program name");
  std::ostringstream os;
  os << kPlanMagic << "\nname " << p.name << "\nmesh " << p.mesh.size();
  for (Device d : p.mesh.devices()) os << " " << d.str();
  os << " shape " << p.mesh.ndim();
  for (int64_t e : p.mesh.shape()) os << " " << e;
  os << " axes";
  for (const auto& a : p.mesh.axis_names()) check_word(a, "mesh axis name"), os << " " << a;
  os << "  # " << p.mesh.str() << "\n";
  for (size_t i = 0; i < p.in.size(); ++i) os << "argument " << i << " ", put_layout(os, p.in[i]), os << "  # " << p.in[i].str() << "\n";
  for (size_t j = 0; j < p.out.size(); ++j) os << "result " << j << " ", put_layout(os, p.out[j]), os << "  # " << p.out[j].str() << "\n";
  for (size_t j = 0; j < p.collectives.size(); ++j) {
    const auto& c = p.collectives[j];
    os << "collective " << j << " ";
    put_layout(os, c.from);
    os << " -> ";
    put_layout(os, c.to);
    os << "  # " << c.how << " " << c.from.str() << " -> " << c.to.str() << "\n";
  }
  for (size_t d = 0; d < p.device_files.size(); ++d) os << "device " << d << " " << p.device_files[d] << "\n";
  return with_checksum(os.str(), crc);
}

std::string device_plan_text(const DevicePlanFile& d) {
  std::ostringstream os;
  auto ids = [&](const std::vector<int32_t>& v) {
    os << " " << v.size();
    for (int32_t i : v) os << " " << i;
  };
  os << kDeviceMagic << "\nplan " << hex8(d.plan_checksum) << "\ndevice " << d.device << "\nvalues " << d.num_values
     << "\nargs";
  ids(d.args);
  os << "\nresults";
  ids(d.results);
  os << "\ncollectives " << d.coll_src.size();
  for (size_t j = 0; j < d.coll_src.size(); ++j) os << " " << d.coll_src[j] << " " << d.coll_dst[j];
  os << "\n";
  for (size_t s = 0; s < d.segments.size(); ++s) {
    const auto& g = d.segments[s];
    if (!g.file.empty()) check_word(g.file, "segment file name");
    os << "segment " << s << " " << (g.file.empty() ? "none" : g.file) << " inputs";
    ids(g.inputs);
    os << " outputs";
    ids(g.outputs);
    os << "\n";
  }
  return with_checksum(os.str(), nullptr);
}

void write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f || !(f << text) || !f.flush())
      throw ValueError("DistributedCallable::export_mef: cannot write '" + tmp + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw ValueError("DistributedCallable::export_mef: cannot write '" + path + "'");
  }
}

PlanFile read_plan(const std::string& path) {
  Reader r(path, kPlanMagic);
  PlanFile p;
  p.checksum = r.checksum;
  r.expect("name");
  p.name = r.word("the program name");
  r.line_done();
  r.expect("mesh");
  const int64_t n = r.integer("the number of mesh devices", 1, 1 << 16);
  std::vector<Device> devs;
  for (int64_t i = 0; i < n; ++i) {
    const std::string w = r.word("a device");
    devs.push_back(r.checked([&] { return Device::parse(w); }));
  }
  r.keyword("shape");
  const int64_t nd = r.integer("the mesh rank", 1, 16);
  Shape shape;
  for (int64_t i = 0; i < nd; ++i) shape.push_back(r.integer("a mesh extent", 1, 1 << 16));
  r.keyword("axes");
  std::vector<std::string> axes;
  for (int64_t i = 0; i < nd; ++i) axes.push_back(r.word("a mesh axis name"));
  r.line_done();
  p.mesh = r.checked([&] { return DeviceMesh(devs, shape, axes); });
  auto layouts = [&](const char* key, std::vector<DistributedLayout>& v) {
    while (r.next_is(key)) {
      r.expect(key);
      r.integer((std::string(key) + " number").c_str(), static_cast<int64_t>(v.size()), static_cast<int64_t>(v.size()));
      v.push_back(r.layout(p.mesh));
      r.line_done();
    }
  };
  layouts("argument", p.in);
  if (p.in.empty()) r.expect("argument");
  layouts("result", p.out);
  if (p.out.empty()) r.expect("result");
  while (r.next_is("collective")) {
    r.expect("collective");
    const int64_t j = static_cast<int64_t>(p.collectives.size());
    r.integer("the collective number", j, j);
    DistributedLayout from = r.layout(p.mesh);
    r.keyword("->");
    DistributedLayout to = r.layout(p.mesh);
    r.line_done();
    if (from.dtype != to.dtype || from.shape != to.shape)
      r.fail("collective " + std::to_string(j) + " changes the dtype or global shape (" + from.str() + " -> " +
             to.str() + ")");
    p.collectives.push_back({std::move(from), std::move(to), ""});
  }
  for (int64_t d = 0; d < p.mesh.size(); ++d) {
    r.expect("device");
    r.integer("the device number", d, d);
    p.device_files.push_back(r.word("the device plan file"));
    r.line_done();
  }
  r.end();
  return p;
}

DevicePlanFile read_device_plan(const std::string& path, const PlanFile& plan, int64_t device) {
  Reader r(path, kDeviceMagic);
  DevicePlanFile d;
  r.expect("plan");
  const std::string c = r.word("the plan's checksum");
  r.line_done();
  if (c != hex8(plan.checksum))
    r.fail("belongs to another export (plan checksum " + c + ", the .plan file's is " + hex8(plan.checksum) + ")");
  d.plan_checksum = plan.checksum;
  r.expect("device");
  d.device = r.integer("the device number", device, device);
  r.line_done();
  r.expect("values");
  d.num_values = r.integer("the number of values", 1, int64_t{1} << 30);
  r.line_done();
  const int64_t nv = d.num_values, K = static_cast<int64_t>(plan.collectives.size());
  r.expect("args");
  d.args = r.ids("the number of arguments", nv);
  r.line_done();
  if (d.args.size() != plan.in.size())
    r.fail(std::to_string(d.args.size()) + " arguments; the plan has " + std::to_string(plan.in.size()));
  r.expect("results");
  d.results = r.ids("the number of results", nv);
  r.line_done();
  if (d.results.size() != plan.out.size())
    r.fail(std::to_string(d.results.size()) + " results; the plan has " + std::to_string(plan.out.size()));
  r.expect("collectives");
  r.integer("the number of collectives", K, K);
  for (int64_t j = 0; j < K; ++j) {
    d.coll_src.push_back(static_cast<int32_t>(r.integer("a value id", 0, nv - 1)));
    d.coll_dst.push_back(static_cast<int32_t>(r.integer("a value id", 0, nv - 1)));
  }
  r.line_done();
  for (int64_t s = 0; s <= K; ++s) {
    r.expect("segment");
    r.integer("the segment number", s, s);
    PlanSegment g;
    g.file = r.word("the segment's MEF file");
    if (g.file == "none") g.file.clear();
    r.keyword("inputs");
    g.inputs = r.ids("the number of inputs", nv);
    r.keyword("outputs");
    g.outputs = r.ids("the number of outputs", nv);
    r.line_done();
    if (g.file.empty() && !g.outputs.empty()) r.fail("segment " + std::to_string(s) + " has outputs but no MEF file");
    d.segments.push_back(std::move(g));
  }
  r.end();
  return d;
}

}  // namespace kiln::distributed::detail
