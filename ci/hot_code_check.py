#!/usr/bin/python3
"""Compares the machine code of the timed functions of two lockline binaries.

The functions whose demangled names match the pattern (default: pagevec's and zone_lock's timed
code) are disassembled with objdump, link-dependent addresses and offsets normalized, and
compared. Exit 0 when all are identical, 1 when any differs or is missing, 2 on bad input."""
import argparse
import difflib
import re
import shutil
import subprocess
import sys

DEFAULT_PATTERN = (r"PagevecWorkload<.*>::(Run<|RunWindow|ReleasePages|TakeReturned|"
                   r"FreePagevec|Acquire|Release\(|Work\()|"
                   r"ZoneLockWorkload<.*>::(RunWindow|AllocPage|FreePage|TeardownThread)")


def functions(binary, pattern):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", binary],
                         capture_output=True, text=True, check=True).stdout
    result, current = {}, None
    for line in out.split("\n"):
        header = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if header:
            current = header.group(1) if pattern.search(header.group(1)) else None
            if current:
                result[current] = []
            continue
        if current and "\t" in line:
            ins = line.split("\t", 1)[1]
            ins = re.sub(r"[0-9a-f]+ <[^>]*>", "ADDR", ins)
            ins = re.sub(r"-?0x[0-9a-f]+\(%rip\)", "RIP", ins)
            ins = re.sub(r"%fs:0x[0-9a-f]+", "%fs:TLS", ins)
            ins = re.sub(r"#.*", "", ins).strip()
            result[current].append(ins)
    return result


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--pattern", default=DEFAULT_PATTERN)
    ap.add_argument("--show", help="print the instruction diff of the first differing "
                                   "function whose name matches this regex")
    args = ap.parse_args(argv)
    if shutil.which("objdump") is None:
        print("hot_code_check: error: objdump not found (Debian: binutils)", file=sys.stderr)
        return 2
    try:
        pattern = re.compile(args.pattern)
        old = functions(args.old, pattern)
        new = functions(args.new, pattern)
    except (re.error, OSError, subprocess.CalledProcessError) as e:
        print(f"hot_code_check: error: {e}", file=sys.stderr)
        return 2
    if not old:
        print(f"hot_code_check: error: no function of {args.old} matches {args.pattern!r}",
              file=sys.stderr)
        return 2
    missing = [name for name in sorted(old) if name not in new]
    differ = [name for name in sorted(old) if name in new and old[name] != new[name]]
    same = len(old) - len(missing) - len(differ)
    for name in differ:
        print(f"differs: {name[:160]} ({len(old[name])} -> {len(new[name])} instructions)")
    for name in missing:
        print(f"missing in new: {name[:160]}")
    print(f"{len(old)} timed functions: {same} identical, {len(differ)} differ, "
          f"{len(missing)} missing; instructions {sum(map(len, old.values()))} -> "
          f"{sum(len(new.get(n, [])) for n in old)}")
    if args.show:
        for name in differ:
            if re.search(args.show, name):
                print("\n".join(difflib.unified_diff(old[name], new[name], "old", "new",
                                                     lineterm="", n=1)))
                break
    return 0 if not differ and not missing else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
