#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "../tensor/cpu_devices.h"
// The distributed/ tests use meshes of up to 8 CPU devices of this process
// (as KILN_CPU_DEVICES=8 would), set before any test runs.
static const bool kEightCpuDevices = (kiln::set_num_cpu_devices(8), true);
