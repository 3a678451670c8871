#!/usr/bin/env python3
"""Writes the README.md of a folder of real-GPU measurements (scripts/gpu-measure.sh makes them),
with the twin's prediction beside every real figure where the twin knows the GPU.

  scripts/gpu_measure_report.py DIR [--gpucap build/gpucap] > DIR/README.md

The folder holds what gpu-measure.sh writes: sweep-MODEL-PRECISION.json (the --out files of
`gpucap tune --platform nvml`), capped-ALGO-CAP.json (`gpucap run --platform nvml --json`;
capped-CAP.json is batchsizer at its own window, as older runs named it), share-POLICY.json,
serve-ALGO-CAP.json and serve-ALGO-CAP.load.json (`gpucap serve --json`, `gpucap load --json`) and
devices.json; and, where it was written by hand, notes.md: a title and how the folder was measured
(it heads the README). The twin's figures are computed here, by running the twin (`gpucap run --gpu ...`)
for each measured point: the same setup, the same length. Needs only python3 and gpucap.
"""

import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys

# Real GPU names (as NVML reports them) -> the twin's GPU ids.
TWINS = [("H200", "h200"), ("H100", "h100"), ("A100", "a100"), ("A40", "a40"), ("V100-PCIE", "v100-pcie"), ("V100", "v100"),
         ("3080 Ti", "rtx3080ti"), ("P100", "p100"), ("P40", "p40"), ("RTX 6000", "rtx6000")]
# How each capped run was made: (algorithm, extra gpucap options, what the table calls it).
CAPPED = {
    "batchsizer": ("batchsizer", [], "batchsizer (its window: 10 batches)"),
    "batchsizer-1s": ("batchsizer", ["--window", "1s"], "batchsizer, 1-s window"),
    "capfit": ("capfit", [], "capfit (gpucap)"),
}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def twin_of(gpu_name):
    return next((twin for key, twin in TWINS if key in gpu_name), None)


def pct(twin, real):
    return f"{100 * (twin / real - 1):+.1f} %" if real > 0 else "–"


class Twin:
    """Runs the twin for one real figure; answers None where the twin cannot (unknown model...)."""

    def __init__(self, gpucap, gpu):
        self.gpucap, self.gpu = gpucap, gpu

    def run(self, model, precision, seconds, cap_w, *options):
        if not self.gpucap or not self.gpu:
            return None
        command = [self.gpucap, "run", "--gpu", self.gpu, "--model", model, "--precision", precision,
                   "--power-cap", f"{cap_w:g}", "--duration", f"{seconds:g}", "--json", *options]
        done = subprocess.run(command, capture_output=True, text=True)
        return json.loads(done.stdout) if done.returncode == 0 else None


def twin_max_limit(gpucap, gpu):
    """The twin GPU's largest power limit (`gpucap list gpus --json`); 0 without gpucap or GPU."""
    if not gpucap or not gpu:
        return 0.0
    done = subprocess.run([gpucap, "list", "gpus", "--json"], capture_output=True, text=True)
    gpus = json.loads(done.stdout) if done.returncode == 0 else []
    return next((g["power_limit_w"]["max"] for g in gpus if g["id"] == gpu), 0.0)


def model_of(setup):
    return os.path.splitext(os.path.basename(setup["model_file"]))[0]


def sweeps_section(out, sweeps, twin, twin_cap_w):
    print("## 1. Batch sweeps at the GPU's own clocks\n")
    for path in sweeps:
        sweep = load(path)
        setup = sweep["setup"]
        model, precision = model_of(setup), setup["precision"]
        print(f"### {model}, {precision}\n")
        print(f"{setup['warmup_s']:g} s warm-up, then {setup['measure_s']:g} s measured per point; batch latency = "
              "batch / throughput (batches back to back).\n")
        print("| batch | real img/s | real batch ms | real mean W | real max W | twin img/s | twin max W | img/s error "
              "| max W error |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in sorted(sweep["trials"], key=lambda t: t["batch_size"]):
            b, thr, mx, mean = t["batch_size"], t["throughput_img_s"], t["max_power_w"], t["mean_power_w"]
            tw = twin.run(model, precision, setup["measure_s"], twin_cap_w, "--algorithm", "batchsizer",
                          "--batch-sizes", str(b))
            cols = (f"{tw['throughput_img_s']:.1f} | {tw['max_power_w']:.1f} | {pct(tw['throughput_img_s'], thr)} | "
                    f"{pct(tw['max_power_w'], mx)}") if tw else "– | – | – | –"
            print(f"| {b} | {thr:.1f} | {1000 * b / thr if thr else 0:.2f} | {mean:.1f} | {mx:.1f} | {cols} |")
        print()


def capped_runs(out):
    """[(cap W, kind, result)] from capped-KIND-CAP.json and the older capped-CAP.json."""
    runs = []
    for path in glob.glob(os.path.join(out, "capped-*.json")):
        match = re.fullmatch(r"capped-(?:(.+)-)?(\d+)\.json", os.path.basename(path))
        if match and (match.group(1) or "batchsizer") in CAPPED:
            runs.append((int(match.group(2)), match.group(1) or "batchsizer", load(path)))
    return sorted(runs, key=lambda r: (r[0], list(CAPPED).index(r[1])))


def capped_section(out, sweeps, twin):
    runs = capped_runs(out)
    if not runs:
        return
    engine = runs[0][2]["engine"]
    model_file = runs[0][2]["model_file"]
    sweep_path = next((p for p in sweeps if load(p)["setup"]["model_file"] == model_file and
                       load(p)["setup"]["precision"] in engine), None)
    sweep = load(sweep_path) if sweep_path else None
    model = os.path.splitext(os.path.basename(model_file))[0]
    precision = sweep["setup"]["precision"] if sweep else "fp16"
    print(f"## 2. Under software caps ({model}, {precision})\n")
    writes = sum(r.get("device_writes", 0) for _, _, r in runs)
    print(f"The cap is gpucap's own target, not the GPU's power limit (writes to the GPU in these runs: {writes}). "
          "**over** is the share of the run's time whose power samples were above the cap; the best static batch is "
          "the sweep's fastest batch size whose window maximum stayed under the cap. The twin's capfit takes the "
          "same profile, the real sweep.\n")
    print("| cap W | algorithm | s | img/s | over | max W | best static batch | its img/s | / static | twin img/s "
          "| twin over |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cap, kind, r in runs:
        feasible = [t for t in (sweep["trials"] if sweep else []) if t["max_power_w"] <= cap]
        best = max(feasible, key=lambda t: t["throughput_img_s"]) if feasible else None
        algorithm, options, label = CAPPED[kind]
        # capfit on the twin takes the profile the real run took (the real sweep: batch sizes at
        # the GPU's own clocks), not a profile of the twin with its clocks locked.
        if algorithm == "capfit" and sweep_path:
            options = [*options, "--profile", sweep_path]
        tw = twin.run(model, precision, r["duration_s"], cap, "--algorithm", algorithm, *options)
        over = f"{100 * r['time_over_cap_s'] / r['duration_s']:.1f} %"
        ratio = f"{r['throughput_img_s'] / best['throughput_img_s']:.2f}" if best else "–"
        twin_cols = (f"{tw['throughput_img_s']:.1f} | {100 * tw['time_over_cap_s'] / tw['duration_s']:.1f} %"
                     if tw else "– | –")
        print(f"| {cap} | {label} | {r['duration_s']:.0f} | {r['throughput_img_s']:.1f} | {over} | {r['max_power_w']:.1f} "
              f"| {best['batch_size'] if best else 'none'} | {best['throughput_img_s'] if best else 0:.1f} "
              f"| {ratio} | {twin_cols} |")
    print()


# The GPUs of gpucap's real runs the share twin knows, with the torchvision models those runs train.
SHARE_TWIN_GPUS = {"h200"}


def share_twin_run(gpucap, gpu, policy, specs):
    """The share twin's run of the measured jobs (torch_<model>); None where it cannot."""
    if not gpucap or not gpu:
        return None
    jobs = []
    for spec in specs:
        name, rest = spec.split("=", 1)
        mode, model, *keys = rest.split(":")
        jobs += ["--job", ":".join([f"{name}={mode}", f"torch_{model}", *keys])]
    # switchflow: the preempted job moves to the GPU's host CPU, as in the real run.
    command = [gpucap, "share", "--gpu", gpu, "--policy", "threads" if policy == "solo" else policy,
               *(["--lpu", "cpu"] if policy == "switchflow" else []),
               "--json", *jobs]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        jobs = json.loads(done.stdout)["jobs"] if done.returncode == 0 else []
    except (subprocess.TimeoutExpired, ValueError, KeyError):
        return None
    return next((j["latency_ms"] for j in jobs if j["name"] == "fg"), None)


def share_section(out, gpucap, twin_gpu):
    solo = load(os.path.join(out, "share-solo.json"))
    if not solo:
        return
    solo_p95 = next(j for j in solo["jobs"] if j["name"] == "fg")["latency_ms"]["p95"]
    share_gpu = twin_gpu if gpucap and twin_gpu in SHARE_TWIN_GPUS else None
    print("## 3. A BS-1 MobileNetV2 inference (high priority) beside ResNet18 training (BS 32)\n")
    if share_gpu:
        print("`gpucap share --platform torch`; the low-priority device of switchflow is the CPU. **twin**: the share "
              f"twin's `{share_gpu}` with the same jobs (`torch_*` models); under switchflow its preempted job moves to "
              "the machine's CPU (`--lpu cpu`), as in the real run. `gpucap bench --matrix switchflow-h200` "
              "compares the two.\n")
    else:
        print("`gpucap share --platform torch`; the low-priority device of switchflow is the CPU. The share twin "
              "knows the paper's GPUs and the H200 only: no twin column.\n")
    print("| policy | fg p50 ms | fg p95 ms | fg p99 ms | p95 / solo | background img/s | twin p50 ms | twin p95 ms "
          "| twin p95 / solo |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    twin_solo = None
    for policy in ("solo", "threads", "switchflow"):
        r = load(os.path.join(out, f"share-{policy}.json"))
        if not r:
            continue
        fg = next(j for j in r["jobs"] if j["name"] == "fg")
        bg = next((j for j in r["jobs"] if j["name"] == "bg"), None)
        lat = fg["latency_ms"]
        background = f"{bg['throughput_img_s']:.1f}" if bg else "–"
        tw = share_twin_run(gpucap, share_gpu, policy, [j["spec"] for j in r["jobs"]])
        if policy == "solo":
            twin_solo = tw
        twin_cols = (f"{tw['p50']:.2f} | {tw['p95']:.2f} | {tw['p95'] / twin_solo['p95']:.2f}" if tw and twin_solo
                     else "– | – | –")
        print(f"| {policy} | {lat['p50']:.2f} | {lat['p95']:.2f} | {lat['p99']:.2f} | {lat['p95'] / solo_p95:.2f} | "
              f"{background} | {twin_cols} |")
    print()


def serve_runs(out):
    """{cap W: {algorithm: (server summary, load report)}} from serve-ALGO-CAP.json and .load.json."""
    runs = {}
    for path in glob.glob(os.path.join(out, "serve-*-*.load.json")):
        match = re.fullmatch(r"serve-(.+)-(\d+)\.load\.json", os.path.basename(path))
        server = load(path[: -len(".load.json")] + ".json")
        client = load(path)
        if match and client:
            runs.setdefault(int(match.group(2)), {})[match.group(1)] = (server, client)
    return runs


def serve_section(out):
    runs = serve_runs(out)
    if not runs:
        return
    any_client = next(iter(next(iter(runs.values())).values()))[1]
    print(f"## 4. `gpucap serve` under software caps ({any_client['model']})\n")
    print(f"`gpucap serve --platform nvml` with the first sweep as capserve's profile, batch cap 32 and a 2-ms "
          f"queue delay (the static setting's, and capserve's bound), p99 SLO {any_client['slo_ms']:g} ms; "
          f"`gpucap load --binary` on the same machine, {any_client['arrivals']}, "
          f"{any_client['duration_s']:g} s, the first {any_client['warmup_s']:g} s a warm-up (the last "
          f"{any_client['duration_s'] - any_client['warmup_s']:g} s measured). The cap is gpucap's own "
          "target: nothing is written to the GPU (**writes**), so static runs as it would with the power limit "
          "left where it is, and capserve holds the cap by its batch cap, delay and admission alone. Client "
          "figures (goodput: answers within the SLO from the scheduled time, per second) cover the measured "
          "seconds; the server's (windows over the cap, energy) its whole run, warm-up included. No twin "
          "column: the serve matrix (docs/results/serve) is the twin's comparison.\n")
    print("| cap W | algorithm | sent | goodput /s | SLO attainment | p50 ms | p99 ms | rejected (429) | failed "
          "| windows over cap | max W | J / answer | writes | goodput / static |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cap in sorted(runs):
        static = runs[cap].get("static")
        for algorithm in sorted(runs[cap], key=lambda a: (a != "capserve", a)):
            server, client = runs[cap][algorithm]
            lat = client["latency_ms"]
            failed = client["failed"]  # timed-out requests included
            if server:
                windows = f"{server['windows_over_cap']} / {server['windows']}"
                per_answer = f"{server['energy_j'] / server['answered']:.3f}" if server["answered"] else "–"
                server_cols = f"{windows} | {server['max_power_w']:.1f} | {per_answer} | {server['device_writes']}"
            else:
                server_cols = "– | – | – | –"
            ratio = (f"{client['goodput_rps'] / static[1]['goodput_rps']:.3f}"
                     if static and static[1]["goodput_rps"] > 0 else "–")
            print(f"| {cap} | {algorithm} | {client['sent']} | {client['goodput_rps']:.1f} | "
                  f"{100 * client['slo_attainment']:.2f} % | {lat.get('p50', 0):.1f} | {lat.get('p99', 0):.1f} | "
                  f"{client['rejected']} ({client['rejected_429']}) | {failed} | {server_cols} | {ratio} |")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--gpucap", help="gpucap binary for the twin's columns (none: no twin columns)")
    args = parser.parse_args()
    out = args.dir
    sweeps = sorted(glob.glob(os.path.join(out, "sweep-*.json")))
    if not sweeps and not capped_runs(out):
        sys.exit(f"gpu_measure_report: error: {out} has no sweep-*.json and no capped-*.json")
    first = load(sweeps[0]) if sweeps else None
    gpu = first["setup"]["gpu"] if first else capped_runs(out)[0][2]["gpu"]
    engine_device = first["setup"]["engine_device"] if first else "?"
    devices = load(os.path.join(out, "devices.json"))
    twin_gpu = twin_of(gpu)
    # The twin's sweep points run at the GPU's largest power limit, as the real sweep did.
    twin_cap_w = devices["devices"][0]["power_limit_w"]["max"] if devices else twin_max_limit(args.gpucap, twin_gpu)
    twin = Twin(args.gpucap, twin_gpu)
    # DIR/notes.md, where there is one, says how the folder was measured: it replaces the title.
    notes_path = os.path.join(out, "notes.md")
    notes = open(notes_path).read().strip() if os.path.exists(notes_path) else None
    print(notes.split("\n\n")[0] + "\n" if notes else f"# Measurements on a real {gpu} — {datetime.date.today()}\n")
    print(f"`scripts/gpu-measure.sh`; engine on `{engine_device}`, synthetic inputs, unprivileged (no "
          f"`--allow-gpu-control`). **real**: measured on the GPU; **twin**: gpucap's simulated "
          f"`{twin_gpu or 'none: the twin does not know this GPU'}`{'' if args.gpucap else ' (not computed here)'}.\n")
    if notes and "\n\n" in notes:
        print(notes.split("\n\n", 1)[1] + "\n")
    sweeps_section(out, sweeps, twin, twin_cap_w)
    capped_section(out, sweeps, twin)
    share_section(out, args.gpucap, twin_gpu)
    serve_section(out)


if __name__ == "__main__":
    main()
