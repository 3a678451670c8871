#!/usr/bin/env python3
"""Runs the README's examples and checks what they print against what the README shows.

Every command line of a ```sh block of README.md is either run (on the twin, in a scratch folder,
in README order so that a file one example writes is there for the next) and must exit 0, or is
listed in SKIPPED below with the reason it cannot run here (a real GPU, minutes of work that another
test covers). A command the README gains without either fails the check, so the README cannot grow
an example that nobody runs. A command ending in " &" is a server: it is started, the block's next
commands run against it, then it gets SIGTERM and must exit 0; the loopback ports a block names are
each replaced by a free one, so that the check never collides with a test running beside it.

An output block is a plain ``` block right after the comment

    <!-- readme-output: COMMAND -->

It shows lines of what COMMAND prints, in order; a line "  ..." stands for any number of lines.
--check compares them; --update rewrites each shown line from the command's output, keeping the
README's choice of lines (a shown line is matched to the output line of the same shape: the same
text with its numbers blanked). A number the code changes cannot go stale in the README.

    scripts/readme_examples.py --check  --gpucap build/gpucap   # CI (ctest readme_examples)
    scripts/readme_examples.py --update --gpucap build/gpucap   # after a change that moves a figure
"""

import argparse
import os
import queue
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# README commands that are not run here, and why. Keys are the command as the README writes it
# (continuation lines joined, the trailing comment dropped, blanks squeezed).
SKIPPED = {
    "./scripts/quickstart.sh": "installs and builds; its gpucap command is run for its output block",
    "./scripts/test.sh": "the test command itself",
    "gpucap monitor -- python train.py": "needs a real GPU (tests/cli/monitor_cli_test.cpp: the fake NVML)",
    "gpucap monitor --gpus 0,1 --json --csv timeline.csv -- python train.py":
        "needs a real GPU (tests/cli/monitor_cli_test.cpp: the fake NVML)",
    "build/gpucap devices": "needs a real GPU (tests/cli/cli_test.cpp: the fake NVML)",
    "scripts/export_models.py --out models/ --models resnet50": "ctest export_torch_models",
    "build/gpucap run --platform nvml --model-file models/resnet50.pt --power-cap 200 --algorithm batchsizer "
    "--duration 120": "needs a real GPU (tests/cli/run_nvml_test.cpp: the fake NVML)",
    "sudo build/gpucap run --platform nvml --model-file models/resnet50.pt --precision fp16 --power-cap 200 "
    "--algorithm batchdvfs --duration 120 --allow-gpu-control": "needs a real GPU and root (run_nvml_test.cpp)",
    "build/gpucap run --platform nvml --model-file models/resnet50.pt --power-cap 200 --algorithm capfit "
    "--duration 120 --search-out resnet50-profile.json": "needs a real GPU (run_nvml_test.cpp)",
    "build/gpucap tune --platform nvml --model-file models/resnet50.pt --power-cap 200 --algorithm bobd "
    "--budget 30 --out resnet50-trials.json": "needs a real GPU (tests/cli/tune_nvml_test.cpp)",
    "build/gpucap bso serve --db sqlite:bso.db --listen 127.0.0.1:8000": "a server that runs until stopped "
        "(tests/service, tests/bsoclient/live_server_test.cpp)",
    "kill %1": "the check stops the servers it started itself (SIGTERM, then it checks the exit status)",
    "kill %1 %2 %3 %4 %5 %6": "the check stops the servers it started itself, the last started first",
    "build/gpucap calibrate": "rewrites the checkout's data/ (minutes; tests/calibrate, scripts/make-fidelity.sh)",
    "build/gpucap fidelity --report fidelity.md": "about 15 minutes of CPU (scripts/make-fidelity.sh writes docs/fidelity.md; "
        "tests/cli/fidelity_cli_test.cpp)",
}

# Output blocks that show what scripts/quickstart.sh prints (its gpucap command).
QUICKSTART_OUTPUTS = {
    "build/gpucap run --gpu p40 --model inception_v1 --dataset imagenet --power-cap 131 --algorithm batchdvfs "
    "--trace trace.csv",
}

# Seconds a run example may take before the check fails it.
TIMEOUT_S = 300

NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def shape(line):
    """The line with its numbers blanked: how a shown line finds its output line."""
    return NUMBER.sub("#", line.rstrip())


def normalise(command):
    return " ".join(command.split())


def readme_blocks(text):
    """Yields (kind, lines, start_index, end_index, annotation) for each fenced block."""
    lines = text.split("\n")
    i = 0
    annotation = None
    while i < len(lines):
        line = lines[i]
        marker = re.match(r"\s*<!-- readme-output: (.*) -->\s*$", line)
        if marker:
            annotation = normalise(marker.group(1))
            i += 1
            continue
        fence = re.match(r"```(\w*)\s*$", line)
        if not fence:
            if line.strip():
                annotation = None
            i += 1
            continue
        kind = fence.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if j == len(lines):
            raise SystemExit(f"readme_examples: error: README.md:{i + 1}: a code block is never closed")
        yield kind, lines[i + 1:j], i + 1, j, annotation
        annotation = None
        i = j + 1


def commands_of(block_lines):
    """The commands of a ```sh block: continuation lines joined, comments and blank lines dropped."""
    commands = []
    pending = ""
    for raw in block_lines:
        line = raw.rstrip()
        if pending:
            line = pending + " " + line.strip()
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        code = line
        # A comment starts at " #" outside quotes: the README's comments are never inside them.
        match = re.search(r"(^|\s)#", code)
        if match:
            code = code[:match.start()]
        code = normalise(code)
        if code:
            commands.append(code)
    if pending:
        commands.append(normalise(pending))
    return commands


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Ports:
    """The loopback ports a block's commands name, each replaced by a free one (the same for every
    command of the block), so that a README server does not collide with a test running beside
    the check."""

    def __init__(self):
        self.map = {}

    def rewrite(self, command):
        def replace(match):
            port = match.group(1)
            if port not in self.map:
                self.map[port] = str(free_port())
            return f"127.0.0.1:{self.map[port]}"
        return re.sub(r"127\.0\.0\.1:([0-9]{2,5})", replace, command)


# What a README command may start with to be run: gpucap, and the throwaway etcd its cluster
# example starts (a server, like gpucap serve).
RUNNABLE = ("build/gpucap ", "scripts/local-etcd.sh ")


def start_background(command, gpucap, cwd):
    """A README command ending in ' &' (a server): started, and ready once it prints the line
    'stop with Ctrl-C'. Returns the process, or an error message."""
    words = shlex.split(command[:-1].strip())
    if words and words[0] == "build/gpucap":
        words[0] = str(gpucap)
    elif words and words[0].startswith("scripts/"):
        words[0] = str(ROOT / words[0])
    process = subprocess.Popen(words, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Its stdout is read on a thread, so that a server that never says it is ready (or hangs)
    # fails the check after the deadline instead of blocking it.
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if "stop with Ctrl-C" in line:
            return process, None
    process.kill()
    return None, f"did not become ready within 120 s: {process.stderr.read().strip()[-400:]}"


def stop_background(process):
    """SIGTERM, then the exit status (None if it did not stop within 60 s)."""
    process.terminate()
    try:
        return process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        return None


def run(command, gpucap, cwd):
    """Runs a README command with build/gpucap replaced by the binary under test."""
    words = shlex.split(command)
    if words and words[0] == "build/gpucap":
        words[0] = str(gpucap)
    started = time.monotonic()
    try:
        done = subprocess.run(words, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {TIMEOUT_S} s", time.monotonic() - started
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def compare(shown, output):
    """The first difference between the README's shown lines and the output, or None."""
    out = output.rstrip("\n").split("\n")
    k = 0
    skipping = False
    for line in shown:
        if line.strip() == "...":
            skipping = True
            continue
        if skipping:
            while k < len(out) and out[k].rstrip() != line.rstrip():
                k += 1
        if k >= len(out):
            return f"the README shows '{line.strip()}', which the output does not have (in that order)"
        if out[k].rstrip() != line.rstrip():
            return f"the README shows '{line.strip()}' where the command prints '{out[k].strip()}'"
        k += 1
        skipping = False
    return None


def updated(shown, output):
    """The shown lines, each replaced by the output line of its shape."""
    out = output.rstrip("\n").split("\n")
    new = []
    k = 0
    for line in shown:
        if line.strip() == "...":
            new.append(line)
            continue
        while k < len(out) and shape(out[k]) != shape(line):
            k += 1
        if k == len(out):
            raise SystemExit(f"readme_examples: error: no output line has the shape of '{line.strip()}'")
        new.append(out[k].rstrip())
        k += 1
    return new


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="run every example and compare its output block")
    mode.add_argument("--update", action="store_true", help="rewrite the output blocks from what the commands print")
    parser.add_argument("--gpucap", required=True, help="the gpucap binary to run for build/gpucap")
    parser.add_argument("--readme", default=str(README))
    args = parser.parse_args()
    gpucap = Path(args.gpucap).resolve()
    if not os.access(gpucap, os.X_OK):
        raise SystemExit(f"readme_examples: error: {gpucap} is not an executable")
    readme = Path(args.readme)
    text = readme.read_text()
    blocks = list(readme_blocks(text))

    failures = []
    outputs = {}
    with tempfile.TemporaryDirectory(prefix="gpucap-readme-") as scratch:
        # The examples run in a scratch folder beside a link to the shared data, so that their
        # ../shared/data paths resolve and the files they write stay out of the checkout.
        work = Path(scratch) / "work"
        work.mkdir()
        (Path(scratch) / "shared").symlink_to((ROOT.parent / "shared").resolve())
        for kind, lines, start, _, annotation in blocks:
            if kind != "sh":
                continue
            ports = Ports()
            servers = []
            for command in commands_of(lines):
                if command in SKIPPED:
                    print(f"skipped  {command}  ({SKIPPED[command]})")
                    continue
                if not command.startswith(RUNNABLE):
                    failures.append(f"README.md:{start}: '{command}' is neither run nor listed as skipped "
                                    "in scripts/readme_examples.py")
                    continue
                if command.endswith(" &"):
                    process, problem = start_background(ports.rewrite(command), gpucap, work)
                    print(f"{'started' if process else 'FAILED':<8} {command}")
                    if process:
                        servers.append((command, process))
                    else:
                        failures.append(f"README.md:{start}: '{command}' {problem}")
                    continue
                code, out, err, seconds = run(ports.rewrite(command), gpucap, work)
                outputs[command] = out
                status = "ok" if code == 0 else f"exit {code}"
                print(f"{status:<8} {command}  ({seconds:.1f} s)")
                if code != 0:
                    failures.append(f"README.md:{start}: '{command}' failed ({status}): {err.strip()[-400:]}")
            for command, process in reversed(servers):  # the last started first: nodes before their etcd
                code = stop_background(process)
                print(f"{'stopped' if code == 0 else f'exit {code}':<8} {command}")
                if code != 0:
                    failures.append(f"README.md:{start}: '{command}' did not stop cleanly on SIGTERM (exit {code})")
        new_lines = text.split("\n")
        for kind, lines, start, end, annotation in reversed(blocks):
            if annotation is None:
                continue
            if annotation not in outputs:
                # An output of a skipped command (the quickstart's): the command it runs is run here.
                code, out, err, seconds = run(annotation, gpucap, work)
                print(f"{'ok' if code == 0 else f'exit {code}':<8} {annotation}  ({seconds:.1f} s, for its output)")
                if code != 0:
                    failures.append(f"README.md:{start}: '{annotation}' failed: {err.strip()[-400:]}")
                    continue
                outputs[annotation] = out
            if args.update:
                new_lines[start:end] = updated(lines, outputs[annotation])
            else:
                problem = compare(lines, outputs[annotation])
                if problem:
                    failures.append(f"README.md:{start + 1}: output of '{annotation}': {problem} "
                                    "(scripts/readme_examples.py --update rewrites it)")
    # The quickstart's output block shows what scripts/quickstart.sh prints: its command must be the
    # script's.
    quickstart = normalise((ROOT / "scripts" / "quickstart.sh").read_text().replace("\\\n", " "))
    for kind, lines, start, end, annotation in blocks:
        if annotation and annotation in QUICKSTART_OUTPUTS and annotation.replace("build/", "./build/", 1) not in quickstart:
            failures.append(f"README.md:{start}: scripts/quickstart.sh does not run '{annotation}'")
    if args.update:
        readme.write_text("\n".join(new_lines))
        print(f"readme_examples: rewrote the output blocks of {readme}")
    for failure in failures:
        print(f"readme_examples: FAIL: {failure}", file=sys.stderr)
    if failures:
        return 1
    print(f"readme_examples: every README example ran; every output block matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
