"""The harness's rooms keep their include arrows one way (harness/README.md).

run/ may include every room; record/ and measure/ only the rooms below them; machine/ only
itself. harness/family.h is the contract bench/ is written against and may be included from any
room; harness/locks/ needs only machine/ and the contract; layouts/ only machine/ and the lock types
they embed. bench/ never includes run/ or record/.
"""

import os
import re
from pathlib import Path

ROOT = Path(os.environ.get("LOCKLINE_SOURCE_DIR", Path(__file__).resolve().parents[2]))
INCLUDE = re.compile(r'^#include "harness/([a-z_]+(?:/[a-z_]+)?)\.h"', re.M)

# What each place may include, by room ("family" = harness/family.h, the contract).
ALLOWED = {
    "machine": {"machine", "family"},
    "measure": {"machine", "measure", "locks", "family"},
    "record": {"machine", "measure", "record", "family"},
    "run": {"machine", "measure", "record", "run", "locks", "family"},
    "locks": {"machine", "locks", "family"},
    "family": {"machine", "measure", "family"},
    "bench": {"machine", "measure", "locks", "family"},
    "layouts": {"machine", "locks"},
}
# Arrows kept against the rule, each with its reason.
EXCEPTIONS = {
    # CollectProvenance records the run's Options as given on the command line.
    ("harness/record/provenance.h", "run/options"),
}


def room_of_include(target):
    return target.split("/")[0] if "/" in target else target


def place_of(path):
    rel = path.relative_to(ROOT).as_posix()
    parts = rel.split("/")
    if parts[0] == "harness":
        return "family" if len(parts) == 2 else parts[1]
    return parts[0]


def sources():
    for top in ("harness", "bench", "layouts"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in (".h", ".cpp"):
                yield path


def test_harness_files_sit_in_rooms():
    loose = [p.name for p in (ROOT / "harness").iterdir()
             if p.is_file() and p.suffix in (".h", ".cpp") and p.stem != "family"]
    assert loose == [], f"harness/ files outside a room: {loose}"


def test_include_arrows_run_one_way():
    wrong = []
    for path in sources():
        place = place_of(path)
        rel = path.relative_to(ROOT).as_posix()
        for target in INCLUDE.findall(path.read_text()):
            room = room_of_include(target)
            if room not in ALLOWED[place] and (rel, target) not in EXCEPTIONS:
                wrong.append(f"{rel} includes harness/{target}.h ({place} -> {room})")
    assert wrong == [], "\n".join(wrong)
