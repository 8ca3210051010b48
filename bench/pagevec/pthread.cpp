// pagevec's workloads (bench/pagevec.h) for glibc's pthread mutex.
#include "bench/pagevec.h"

namespace lockline::pagevec_bench {

template LOCKLINE_PAGEVEC_FACTORY(PthreadMutexLock);

}  // namespace lockline::pagevec_bench
