// Calibrations shared between the two processes of a build duet
// (harness/run/build_duet.h). lockline calibrates some work once per process
// (the ThinkNs rate, work_ns:cal's fault and zeroing cost per page and the
// models' own cost per page). Two processes on a loaded machine measure them
// differently, and the difference would show as a change between the builds
// that is neither's code: `lockline --duet-with` therefore makes both
// processes use one value per calibration, whichever process measures it
// first.
#pragma once

#include <functional>
#include <string>

namespace lockline {

/// The environment variable naming the directory of shared calibrations
/// (set by lockline --duet-with for itself and its window server).
inline constexpr const char* kSharedCalibrationEnv =
    "LOCKLINE_SHARED_CALIBRATION";

/// `measure()`, or the value another process of the same build duet measured
/// for `name`: with $LOCKLINE_SHARED_CALIBRATION naming a directory, reads
/// DIR/<name> when it exists, else measures and writes it there (created
/// exclusively: the first writer wins, and a later reader takes its value).
/// Without the variable (every ordinary run), just `measure()`. `name`: a
/// file name ([A-Za-z0-9_.:-]; other characters become '_'). Never throws for
/// an unreadable or unwritable directory (then the own measurement is used).
double SharedCalibration(const std::string& name,
                         const std::function<double()>& measure);

}  // namespace lockline
