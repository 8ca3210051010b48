// pagevec's workloads (bench/pagevec.h) for ttas (2.6.9's) and ticket.
#include "bench/pagevec.h"

namespace lockline::pagevec_bench {

template LOCKLINE_PAGEVEC_FACTORY(TtasLock);
template LOCKLINE_PAGEVEC_FACTORY(TicketLock);

}  // namespace lockline::pagevec_bench
