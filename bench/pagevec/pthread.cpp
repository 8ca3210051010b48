// pagevec's workloads (bench/pagevec.h) for glibc's pthread mutex and spinlock,
// every layout. One group of locks per translation unit, so the cores of the
// build compile the 7 locks x 6 layouts in parallel (issue 28).
#include "bench/pagevec.h"

namespace lockline::pagevec_bench {

template LOCKLINE_PAGEVEC_FACTORY(PthreadMutexLock);
template LOCKLINE_PAGEVEC_FACTORY(PthreadSpinLock);

}  // namespace lockline::pagevec_bench
