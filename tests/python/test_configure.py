"""ci/configure.sh keeps a user's build directory as the user configured it (issue 48).

ci/run_suite.sh given an existing LOCKLINE_BUILD_DIR used to reconfigure it with
-DLOCKLINE_WERROR=ON, so a Release build in which GCC 12 warns stopped where a plain cmake build
of the same tree succeeds. Only a new directory, or ci/test.sh's --werror, turns -Werror on.
"""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(os.environ.get("LOCKLINE_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def cache_value(build, name):
    text = (build / "CMakeCache.txt").read_text()
    return re.search(rf"^{name}:[A-Z]+=(.*)$", text, re.M).group(1)


def configure(*args):
    subprocess.run(["bash", "ci/configure.sh", *map(str, args)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def test_existing_build_keeps_its_werror_and_type(tmp_path):
    build = tmp_path / "b"
    subprocess.run(["cmake", "-S", ".", "-B", str(build), "-DLOCKLINE_WERROR=OFF",
                    "-DCMAKE_BUILD_TYPE=Release"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    configure(build)
    assert cache_value(build, "LOCKLINE_WERROR") == "OFF"
    assert cache_value(build, "CMAKE_BUILD_TYPE") == "Release"
    configure(build, "--werror")
    assert cache_value(build, "LOCKLINE_WERROR") == "ON"


def test_new_build_is_warning_free(tmp_path):
    build = tmp_path / "n"
    configure(build)
    assert cache_value(build, "LOCKLINE_WERROR") == "ON"
