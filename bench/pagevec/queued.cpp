// pagevec's workloads (bench/pagevec.h) for the MCS lock and the qspinlock
// (5.8's spinlock), every layout. One group of locks per translation unit, so
// the cores of the build compile them in parallel.
#include "bench/pagevec.h"

namespace lockline::pagevec_bench {

template LOCKLINE_PAGEVEC_FACTORY(McsLock);
template LOCKLINE_PAGEVEC_FACTORY(QspinLock);

}  // namespace lockline::pagevec_bench
