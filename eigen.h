// kiln: Eigen interop (opt-in; pulls in Eigen's headers).
#pragma once
#include <Eigen/Core>

#include "kiln.h"
