// kiln: several CPU devices in one process (Device::cpu(i)), as JAX's host
// platform device count: the devices of a mesh of CPU devices, each with a
// worker thread of its own, so a 4-device mesh runs on a 2-core machine.
#pragma once
#include <functional>
#include <vector>

#include "device.h"

namespace kiln {

/// The number of CPU devices of this process: set_num_cpu_devices(n), else
/// the environment variable KILN_CPU_DEVICES, else 1. Fixed at its first
/// read (the first use of a CPU device other than 0).
int num_cpu_devices();
/// Sets the number of CPU devices (1 ... 1024; ValueError otherwise). Call
/// it before the first use of a CPU device other than 0; afterwards a
/// different count throws ValueError (the same count is accepted).
void set_num_cpu_devices(int n);
/// CPU device `i` of this process, Device::cpu(i), checked now: DeviceError
/// when i is outside [0, num_cpu_devices()) (Device::cpu(i) checks when
/// memory is allocated on it).
Device cpu_device(int i);
/// Throws DeviceError naming `who` when `d` is a CPU device past
/// num_cpu_devices() (memory on cpu:i is allocated for i < the count only).
void check_cpu_device(Device d, const char* who);

namespace detail {
/// Makes the count at least `n` (distributed::init under mpiexec: mesh
/// device k is process k's, Device::cpu(k)); ValueError when it is already
/// fixed below `n`.
void ensure_cpu_devices(int n);
}  // namespace detail

/// Runs fn(k) for k in [0, devices.size()) at once, fn(k) on the worker
/// thread of CPU device devices[k] (one thread per device, started at first
/// use and kept), and waits for all; rethrows the exception of the lowest
/// k that threw. Called from a device's worker itself (nested), it runs on
/// fresh threads instead, so it never waits on itself. ValueError for a
/// device that is not a CPU device of this process or appears twice.
void run_on_cpu_devices(const std::vector<Device>& devices, const std::function<void(size_t)>& fn);

}  // namespace kiln
