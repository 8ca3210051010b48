// zone_lock's layouts of placement lock_own_line (bench/zone_lock.h).
#include "bench/zone_lock.h"

namespace lockline::zone_lock {

template LOCKLINE_ZONE_LOCK_FACTORY(kLockOwnLine);

}  // namespace lockline::zone_lock
