// pagevec's workloads (bench/pagevec.h) for the test-and-test-and-set lock
// (2.6.9's spinlock) and the ticket lock, every layout. One group of locks per
// translation unit, so the cores of the build compile them in parallel.
#include "bench/pagevec.h"

namespace lockline::pagevec_bench {

template LOCKLINE_PAGEVEC_FACTORY(TtasLock);
template LOCKLINE_PAGEVEC_FACTORY(TicketLock);

}  // namespace lockline::pagevec_bench
