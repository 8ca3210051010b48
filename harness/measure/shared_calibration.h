// Calibrations shared between the two processes of a build duet: the ThinkNs
// rate and work_ns:cal's per-page costs, measured differently by two
// processes on a loaded machine, would show as a change between the builds;
// so both use one value per calibration, whichever measures it first.
#pragma once

#include <functional>
#include <string>

namespace lockline {

/// The environment variable naming the directory of shared calibrations
/// (set by lockline --duet-with for itself and its window server).
inline constexpr const char* kSharedCalibrationEnv =
    "LOCKLINE_SHARED_CALIBRATION";

/// `measure()`, or with $LOCKLINE_SHARED_CALIBRATION naming a directory the
/// value in DIR/<name> (other characters than [A-Za-z0-9_.:-] become '_'),
/// else measured and written there exclusively (the first writer wins). Never
/// throws for an unusable directory (the own measurement is used).
double SharedCalibration(const std::string& name,
                         const std::function<double()>& measure);

}  // namespace lockline
