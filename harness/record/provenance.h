// Run provenance: versions, compiler, kernel, CPU, topology summary and the
// environment checks that hurt reproducibility (each with a warning).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness/machine/restore.h"
#include "harness/machine/topology.h"
#include "harness/run/options.h"

namespace lockline {

/// The context's build and machine facts (results/SCHEMA.md), one warning per
/// environment problem. Never throws: unreadable facts are "unknown".
nlohmann::json CollectProvenance(const Options& opts, const Topology& topo);

/// True under QEMU's TCG (CPUID leaf 0x40000000 "TCGTCGTCGTCG"), where timing
/// means nothing. Never throws.
bool RunningUnderTcg();

}  // namespace lockline
