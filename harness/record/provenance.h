// Run provenance: versions, compiler, kernel, CPU, topology summary and the
// environment checks that hurt reproducibility (each with a warning).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/machine/restore.h"
#include "harness/machine/topology.h"
#include "harness/run/options.h"

namespace lockline {

/// Facts about the build and the machine for the result file's lockline
/// context (results/SCHEMA.md: version, compiler, library versions, kernel,
/// CPU, topology, environment with every hypervisor source, and one warning
/// per environment problem). Never throws: unreadable facts are "unknown".
nlohmann::json CollectProvenance(const Options& opts, const Topology& topo);

/// True when this process runs in an emulated CPU: QEMU's TCG, whose CPUID
/// hypervisor leaf 0x40000000 carries the signature "TCGTCGTCGTCG". Timing
/// there means nothing (ci/rehearse.sh runs lockline so, for function only).
/// False on real hardware, under KVM and on non-x86 CPUs. Never throws.
bool RunningUnderTcg();

/// The release version in the file name of the shared library that holds
/// `symbol` (dladdr, symlinks resolved: libpfm.so.4.13.0 -> "4.13.0"), or
/// "unknown (PATH)" when the name carries none (a static link).
std::string LibraryFileVersion(void* symbol);

}  // namespace lockline
