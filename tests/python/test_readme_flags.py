"""README.md and `lockline --help` list the same flags (issue 37).

README's Options section holds one fenced block per command, each right after a marker line
`<!-- flags: COMMAND -->` (COMMAND is `lockline --help` or `lockline predict --help`). Every
flag the command's help defines must appear in its block, and every flag the block names must
appear in the help. A flag added to the binary therefore fails this test, with a message naming
the flag, until one line for it is added to README's block.

What counts as "a flag the help defines":
- `lockline --help`: each line indented by exactly two spaces that starts with `--NAME` (the
  flag column of the option tables), and the `--benchmark_*` flags of the paragraph "Google
  Benchmark flags that apply" (not those of "Flags that do not apply, and are refused");
- `lockline predict --help` (argparse): each long option of its "options:" list except --help.

Needs LOCKLINE_BINARY (set by ctest); without it the binary's help is not read and the test
that compares them is skipped. The parsers are checked on small texts here, so a README or help
format change that silently empties either list fails too.
"""
import os
import re
import subprocess

import pytest

BINARY = os.environ.get("LOCKLINE_BINARY", "")
SOURCE = os.environ.get("LOCKLINE_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
README = os.path.join(SOURCE, "README.md")

FLAG = re.compile(r"--[a-z][a-z0-9_-]*")
MARKER = re.compile(r"^<!--\s*flags:\s*(.+?)\s*-->\s*$")

needs_binary = pytest.mark.skipif(
    not (BINARY and os.access(BINARY, os.X_OK)),
    reason=f"LOCKLINE_BINARY ({BINARY or 'unset'}) is not an executable lockline")


def readme_flag_blocks(text):
    """Maps each `<!-- flags: COMMAND -->` marker's COMMAND to the set of `--flags` named in the
    fenced block that follows it (the next ``` ... ``` after the marker). Raises ValueError when
    a marker has no block after it."""
    blocks = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i].strip())
        i += 1
        if not m:
            continue
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i >= len(lines) or not lines[i].strip().startswith("```"):
            raise ValueError(f"README marker '<!-- flags: {m.group(1)} -->' is not followed by "
                             "a fenced ``` block")
        i += 1
        flags = set()
        while i < len(lines) and not lines[i].strip().startswith("```"):
            flags.update(FLAG.findall(lines[i]))
            i += 1
        blocks[m.group(1)] = flags
        i += 1
    return blocks


def lockline_help_flags(help_text):
    """The flags `lockline --help` defines: the flag column of its option tables (lines indented
    by exactly two spaces, starting with --) and the Google Benchmark flags it says apply."""
    flags = set()
    for line in help_text.splitlines():
        m = re.match(r"^  (--[a-z][a-z0-9_-]*)", line)
        if m:
            flags.add(m.group(1))
    applies = re.search(r"Google Benchmark flags that apply:(.*?)(?:\n\s*\n|Flags that do not apply)",
                        help_text, re.S)
    if applies:
        flags.update(f for f in FLAG.findall(applies.group(1)) if f.startswith("--benchmark_"))
    return flags


def argparse_help_flags(help_text):
    """The long options an argparse --help lists under "options:" (or "optional arguments:"),
    without --help."""
    m = re.search(r"^(?:options|optional arguments):\n(.*)", help_text, re.S | re.M)
    if not m:
        return set()
    flags = set()
    for line in m.group(1).splitlines():
        if re.match(r"^  \S", line):  # an option's own line, not its wrapped description
            flags.update(FLAG.findall(line.split("  ", 2)[1] if line.count("  ") > 1 else line))
    flags.discard("--help")
    return flags


def missing_message(command, in_help_only, in_readme_only):
    """The failure text: each flag named with what to do about it."""
    parts = []
    for flag in sorted(in_help_only):
        parts.append(f"{flag}: `{command}` lists it but README.md does not; add one line for it "
                     f"to the block after '<!-- flags: {command} -->' in README's Options section")
    for flag in sorted(in_readme_only):
        parts.append(f"{flag}: README.md's block for `{command}` lists it but `{command}` does "
                     "not; remove it from README or add it to the help text")
    return "\n".join(parts)


def help_of(command):
    """Runs COMMAND (`lockline ...`) with the binary under test; returns stdout + stderr."""
    args = command.split()
    assert args[0] == "lockline", command
    proc = subprocess.run([BINARY, *args[1:]], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{command} exited {proc.returncode}: {proc.stderr.strip()}"
    return proc.stdout + proc.stderr


COMMANDS = ("lockline --help", "lockline predict --help")


def test_readme_has_a_flag_block_per_command():
    with open(README, encoding="utf-8") as f:
        blocks = readme_flag_blocks(f.read())
    for command in COMMANDS:
        assert command in blocks, (f"README.md has no '<!-- flags: {command} -->' block "
                                   "(the Options section lists each command's flags)")
        assert blocks[command], f"README.md's block for `{command}` names no flag"


@needs_binary
@pytest.mark.parametrize("command", COMMANDS)
def test_readme_and_help_list_the_same_flags(command):
    with open(README, encoding="utf-8") as f:
        readme = readme_flag_blocks(f.read())[command]
    text = help_of(command)
    if command == "lockline --help":
        helped = lockline_help_flags(text)
        # README's block may name any flag the help mentions anywhere (e.g. a refused one).
        mentioned = set(FLAG.findall(text))
    else:
        helped = argparse_help_flags(text)
        mentioned = helped | {"--help"}
    assert len(helped) >= 5, f"could not read the flags of `{command}`:\n{text}"
    message = missing_message(command, helped - readme, readme - mentioned)
    assert not message, message


# ---- the parsers, on small texts -------------------------------------------------------------

HELP = """usage: lockline [flags]

Suite and time:
  --quick                 smoke-sized suite
  --budget=DURATION       target wall time, e.g. --window is not a definition here
                          --not-a-definition either (wrapped description)
  --runs=N                a flag added later
Google Benchmark flags that apply: --benchmark_filter=REGEX (matched against the keys --list
prints), --benchmark_repetitions=N.
Flags that do not apply, and are refused: --benchmark_min_time.
"""

ARGPARSE = """usage: lockline predict [-h] [--topology TOPOLOGY] run_dir

options:
  -h, --help            show this help message and exit
  --topology TOPOLOGY   hwloc XML
  -o OUT, --out OUT     output directory (default RUN_DIR/predicted-NAME); not --this
  --validate-against OTHER_RUN
                        compare with --a-run-of-the-target
"""

README_TEXT = """# x
<!-- flags: lockline --help -->
```
--quick                     suite
--budget=DURATION           time
--benchmark_filter=REGEX, --benchmark_repetitions=N
```
<!-- flags: lockline predict --help -->

```
--topology=FILE   target
```
"""


def test_parsers_read_the_flag_columns():
    assert lockline_help_flags(HELP) == {"--quick", "--budget", "--runs", "--benchmark_filter",
                                         "--benchmark_repetitions"}
    assert argparse_help_flags(ARGPARSE) == {"--topology", "--out", "--validate-against"}
    assert readme_flag_blocks(README_TEXT) == {
        "lockline --help": {"--quick", "--budget", "--benchmark_filter", "--benchmark_repetitions"},
        "lockline predict --help": {"--topology"},
    }


def test_message_names_the_missing_flag():
    readme = readme_flag_blocks(README_TEXT)
    msg = missing_message("lockline --help", lockline_help_flags(HELP) - readme["lockline --help"],
                          set())
    assert msg.startswith("--runs: `lockline --help` lists it but README.md does not")
    msg = missing_message("lockline predict --help",
                          argparse_help_flags(ARGPARSE) - readme["lockline predict --help"],
                          {"--gone"})
    assert "--out: " in msg and "--validate-against: " in msg and "--gone: README.md's" in msg


def test_marker_without_block_is_an_error():
    with pytest.raises(ValueError, match="lockline --help"):
        readme_flag_blocks("<!-- flags: lockline --help -->\ntext\n")
