// Ratio: the division the bench/ families' rate and share metrics share.
#pragma once

namespace lockline {

/// a / b, or 0 when b is not positive (e.g. a rate over an empty window).
inline double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace lockline
