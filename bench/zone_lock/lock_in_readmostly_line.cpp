// zone_lock's layouts of placement lock_in_readmostly_line (bench/zone_lock.h).
#include "bench/zone_lock.h"

namespace lockline::zone_lock {

template LOCKLINE_ZONE_LOCK_FACTORY(kLockInReadmostlyLine);

}  // namespace lockline::zone_lock
