// kiln: the text files of an exported multi-device program
// (DistributedCallable::export_mef / distributed::read).
//
// `prefix`.plan, written identically by every process:
//     kiln distributed plan 2
//     name <name>
//     mesh <n> <device>... shape <ndim> <extent>... axes <axis name>...
//     argument <i> <dtype> <rank> <dim>... <placement per mesh axis>...   # human form
//     result <j> <layout as above>                                        # human form
//     collective <j> <from layout> -> <to layout>                         # how, human form
//     device <d> <file of device d's program>          (one per mesh device)
//     checksum <crc32 of every byte before this line, 8 hex digits>
// `prefix`.d<d>.plan, written by the process holding mesh device d:
//     kiln distributed device plan 2
//     plan <the .plan file's checksum>
//     device <d>
//     values <number of values of the device program>
//     args <n> <value id>...      results <n> <value id>...   (one line each)
//     collectives <K> (<source id> <target id>)...
//     segment <s> <MEF file | none> inputs <n> <id>... outputs <n> <id>...   (K + 1 lines)
//     checksum <crc32>
// Placements are spelled as Placement::str() ("Replicated", "Sharded(1)",
// "Partial(sum)"); '#' starts a comment; file names are relative to the
// folder of the .plan file. Every problem reading one is a ValueError
// "distributed::read: '<file>': line <n>: <what>".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "device_mapping.h"

namespace kiln::distributed::detail {

struct PlanCollective {
  DistributedLayout from, to;
  std::string how;  // "all-reduce", ... (comment only)
};

/// The contents of `prefix`.plan.
struct PlanFile {
  std::string name;
  DeviceMesh mesh = DeviceMesh::single(Device::cpu());
  std::vector<DistributedLayout> in, out;
  std::vector<PlanCollective> collectives;
  std::vector<std::string> device_files;  // per mesh device
  uint32_t checksum = 0;
};

struct PlanSegment {
  std::string file;  // empty: no computation
  std::vector<int32_t> inputs, outputs;
};

/// The contents of `prefix`.d<d>.plan.
struct DevicePlanFile {
  uint32_t plan_checksum = 0;
  int64_t device = 0;
  int64_t num_values = 0;
  std::vector<int32_t> args, results, coll_src, coll_dst;
  std::vector<PlanSegment> segments;
};

/// The text of a .plan file (checksum line included); its checksum in `crc`.
/// ValueError when an axis name or the program name contains whitespace.
std::string plan_text(const PlanFile& p, uint32_t* crc);
std::string device_plan_text(const DevicePlanFile& d);
/// Writes `text` to `path` atomically (a temporary file renamed), so that
/// processes writing the same file never leave it torn. ValueError naming
/// the path when it cannot be written.
void write_text_file(const std::string& path, const std::string& text);

/// Reads and validates a .plan file: checksum, syntax, the mesh and layouts
/// (their own constructors' checks), counts. ValueError as described above.
PlanFile read_plan(const std::string& path);
/// Reads and validates a device plan file for `plan`: checksum, syntax, that
/// it belongs to `plan` and is device `device`'s, value ids in range, counts
/// matching the plan. Definedness and types are checked by the caller
/// against the segments' MEF files.
DevicePlanFile read_device_plan(const std::string& path, const PlanFile& plan, int64_t device);

}  // namespace kiln::distributed::detail
