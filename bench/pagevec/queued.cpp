// pagevec's workloads (bench/pagevec.h) for mcs and qspinlock (5.8's).
#include "bench/pagevec.h"

namespace lockline::pagevec_bench {

template LOCKLINE_PAGEVEC_FACTORY(McsLock);
template LOCKLINE_PAGEVEC_FACTORY(QspinLock);

}  // namespace lockline::pagevec_bench
