// pagevec's workloads (bench/pagevec.h) for the test-and-set,
// test-and-test-and-set and ticket locks, every layout. One group of locks per
// translation unit, so the cores of the build compile the 7 locks x 6 layouts
// in parallel (issue 28).
#include "bench/pagevec.h"

namespace lockline::pagevec_bench {

template LOCKLINE_PAGEVEC_FACTORY(TasLock);
template LOCKLINE_PAGEVEC_FACTORY(TtasLock);
template LOCKLINE_PAGEVEC_FACTORY(TicketLock);

}  // namespace lockline::pagevec_bench
