// zone_lock's layouts of placement lock_before_free_area (bench/zone_lock.h).
#include "bench/zone_lock.h"

namespace lockline::zone_lock {

template LOCKLINE_ZONE_LOCK_FACTORY(kLockBeforeFreeArea);

}  // namespace lockline::zone_lock
