// Calibrations shared by a build duet's two processes (one value each,
// whoever measures first), else a loaded machine shows them as a change.
#pragma once

#include <functional>
#include <string>

namespace lockline {

/// Names the directory of shared calibrations (set by --duet-with).
inline constexpr const char* kSharedCalibrationEnv =
    "LOCKLINE_SHARED_CALIBRATION";

/// `measure()`, or under $LOCKLINE_SHARED_CALIBRATION the value in DIR/<name>,
/// else measured and written there (first writer wins); never throws.
double SharedCalibration(const std::string& name,
                         const std::function<double()>& measure);

}  // namespace lockline
