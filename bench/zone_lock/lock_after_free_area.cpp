// zone_lock's 28 zone layouts of placement lock_after_free_area (every lock x
// line x config of bench/zone_lock.h). One placement per translation unit, so
// the cores of the build compile the 112 layouts in parallel.
#include "bench/zone_lock.h"

namespace lockline::zone_lock {

template LOCKLINE_ZONE_LOCK_FACTORY(kLockAfterFreeArea);

}  // namespace lockline::zone_lock
