// pagevec's workloads (bench/pagevec.h) for glibc's pthread mutex, every
// layout. One group of locks per translation unit, so the cores of the build
// compile them in parallel.
#include "bench/pagevec.h"

namespace lockline::pagevec_bench {

template LOCKLINE_PAGEVEC_FACTORY(PthreadMutexLock);

}  // namespace lockline::pagevec_bench
