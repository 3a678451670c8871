#!/usr/bin/env python3
"""Issue 39 prototype: free sharing of one GPU by two jobs of ONE TensorFlow 1.13 process.

Mechanism (each step sourced in README.md beside this file; results in results.txt):
  * one CUDA compute stream per GPU for the whole process (TF's StreamGroupFactory is a process
    singleton keyed by GPU id; every DirectSession's GPU device gets stream group 0) -> one FIFO:
    kernels of both jobs run one at a time in launch order (same context, no time slicing);
  * the stream's launch queue holds at most Q pending kernels; a launch into a full queue blocks
    the host thread; blocked launches enter in the order they blocked;
  * every job's host thread dispatches its ops one after another at H seconds of host work per op
    (TF executor + driver launch), asynchronously (a GPU op is 'done' for the executor once launched);
  * a session.run that feeds a host tensor copies it host->device on the H2D stream, which first
    waits for the compute stream (GPUUtil::CopyCPUTensorToGPU, ThenWaitFor(compute)); fetching a
    GPU tensor copies it device->host after waiting for the compute stream, and sync_on_finish
    (default true in TF 1.13) ends each step with device->Sync(): each of these is a BARRIER =
    "wait until everything enqueued on the stream so far has run" -- whichever job enqueued it;
  * per session.run host overhead O_STEP (training: Keras fit loop, callbacks) / O_INF (inference).

Kernel durations: models.json kernel counts, lognormal sizes (sigma 1, seeded per model) scaled so
that a job ALONE reproduces the paper's solo time (training: Fig. 7 / Fig. 3 step; inference: the
Fig. 6 SwitchFlow bar).  No per-figure or per-model knob.

Run: python3 docs/switchflow/free-sharing/model.py [--quick] [--plain] [KEY=VALUE ...]
"""
import heapq
import pathlib
import zlib
import json
import math
import random
import sys
from collections import deque

ROOT = str(pathlib.Path(__file__).resolve().parents[3] / "data" / "sched") + "/"
MODELS = json.load(open(ROOT + "models.json"))["models"]
CAL = json.load(open(ROOT + "calibration.json"))
PAPER = json.load(open(ROOT + "paper.json"))

# ---------------------------------------------------------------- global parameters (one set)
P = dict(
    H=27e-6,        # host work per op (INF_MODE gpu: also the BS-1 inference's), s; <= 27.7 us
                    # (InceptionResNetV2's BS-1 solo: 863 ops in 23.87 ms, Fig. 6 SwitchFlow bar)
    H_TRAIN=27e-6,  # host work per op of a training step, s (the same value)
    Q=256,          # launch-queue entries per stream, in TF ops (CUDA's ~1024 launches / ~4 per op)
    O_STEP=2.0e-3,  # training session.run host overhead per step, s
    O_INF=0.5e-3,   # inference session.run host overhead per request, s
    EPS=50e-6,      # event-poll / callback latency after a barrier, s
    PCIE=12e9,      # H2D bytes/s
    NMT_SYNCS=60,   # decode iterations, each ending in a loop-condition sync: tensorflow/nmt's
                    # maximum_iterations = round(2.0 x source length), tgt_max_len_infer null, 30 tokens
    SIGMA=1.0,      # lognormal spread of kernel sizes
    FIFO_BLOCKED=True,
    JITTER=0.02,    # step-to-step and op-to-op variation (the twin's 2 %)
    MBV2_HOSTBOUND=0.0,  # >0: hypothesis test, MobileNetV2 training host-paced with this GPU share
    INF_MODE="flops", # BS-1 inference: "gpu" (GPU-paced) or "flops" (host-paced, GPU work = FLOPs / F_EFF)
    F_EFF=5e12,     # FLOP/s a BS-1 inference kernel achieves (INF_MODE flops)
    STAT="mean95",  # Fig. 6 statistic: "p95" (nearest rank of 100) or "mean95" (script: time to 95th / 95)
    HOST_SHARED=0,  # 1: hypothesis test, the jobs' per-op host work on one shared lane (FIFO), as if
                    # launches into the one stream were serialised (README, "Tried and rejected")
    HOST_CONTENTION=0.0,  # c > 0: hypothesis test, host-CPU contention: while two jobs run in the process
                    # (in every panel here one of them a training), every job's per-op host time (H, H_TRAIN,
                    # a solved per-op h alike) is x (1 + c); step overheads O_STEP / O_INF are not scaled
    PHASED=0,       # 1: hypothesis test, a training step's kernel sizes follow its phases (models.json
                    # gpu_kernels_train_breakdown): forward 1/3 and backward 2/3 of the GPU work, the
                    # optimizer's updates OPT_SHARE of it, interleaved with the backward (README, "Tried")
    OPT_SHARE=0.01, # PHASED: the optimizer's share of the GPU work (memory-bound momentum updates)
    HOST_ADD=0.0,   # d > 0: hypothesis test, additive host contention: while two jobs run in the process,
                    # every op's host work takes d seconds more, whatever the job (README, "Tried")
)


def gpu_cal(gpu):
    g = CAL["gpus"][gpu]
    if "relative_to" in g:
        base = CAL["gpus"][g["relative_to"]]
        return g, base, g["relative_speed"]
    return g, None, 1.0


def train_step_s(model, gpu):
    g, base, rel = gpu_cal(gpu)
    if model in g["train_bs32_img_s"]:
        return 32.0 / g["train_bs32_img_s"][model]
    return 32.0 / (base["train_bs32_img_s"][model] * rel)


def infer_s(model, gpu="rtx2080ti"):
    return CAL["gpus"][gpu]["infer_bs1_ms"][model] / 1e3


def lognormal_sizes(n, seed, sigma):
    rng = random.Random(seed)
    return [math.exp(rng.gauss(0.0, sigma)) for _ in range(n)]


def chain_time(durs, h):
    """Serial dispatch (one op every h) into an empty FIFO: time to the last kernel's end."""
    t_launch = 0.0
    fin = 0.0
    for d in durs:
        t_launch += h
        fin = max(fin, t_launch) + d
    return fin


def scaled(shape, target, h):
    """Scale kernel sizes so that chain_time == target (bisection); host-bound -> None."""
    if chain_time([0.0] * len(shape), h) >= target:
        return [0.0] * len(shape), False
    lo, hi = 0.0, target / sum(shape) * 2.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if chain_time([s * mid for s in shape], h) < target:
            lo = mid
        else:
            hi = mid
    return [s * lo for s in shape], True


# ---------------------------------------------------------------- the simulator
class Sim:
    def __init__(self, p):
        self.p = p
        self.now = 0.0
        self.ev = []
        self.seq = 0
        self.stream = deque()         # (job, duration) pending in the launch queue (incl. running)
        self.gpu_busy = False
        self.enq = 0                  # entries enqueued so far
        self.done = 0                 # entries completed so far (FIFO: a prefix)
        self.barriers = []            # heap of (target, seq, job)
        self.blocked = deque()        # (job, duration) waiting for a queue slot
        self.busy_by = {}
        self.host_free = 0.0
        self.live = set()             # jobs started and not finished (HOST_CONTENTION)

    def at(self, t, fn, *a):
        self.seq += 1
        heapq.heappush(self.ev, (t, self.seq, fn, a))

    # jobs are generators yielding ('delay', s) | ('launch', d) | ('barrier',)
    def start(self, job, t=0.0):
        self.at(t, self.begin, job)

    def begin(self, job):
        self.live.add(job)
        self.step(job)

    def step(self, job, _=None):
        try:
            cmd = next(job)
        except StopIteration:
            self.live.discard(job)
            return
        kind = cmd[0]
        if kind == "delay":
            self.at(self.now + cmd[1], self.step, job)
        elif kind == "host":
            h = cmd[1]
            if self.p["HOST_CONTENTION"] > 0 and len(self.live) >= 2:
                h *= 1.0 + self.p["HOST_CONTENTION"]   # hypothesis test (README, "Tried and rejected")
            if self.p["HOST_ADD"] > 0 and len(self.live) >= 2:
                h += self.p["HOST_ADD"]                 # hypothesis test (README, "Tried")
            if self.p["HOST_SHARED"]:
                start = max(self.now, self.host_free)
                self.host_free = start + h
                self.at(self.host_free, self.step, job)
            else:
                self.at(self.now + h, self.step, job)
        elif kind == "launch":
            if len(self.stream) < self.p["Q"] and not self.blocked:
                self.enqueue(job, cmd[1])
                self.at(self.now, self.step, job)
            else:
                self.blocked.append((job, cmd[1]))
        elif kind == "barrier":
            target = self.enq
            if self.done >= target:
                self.at(self.now, self.step, job)
            else:
                self.seq += 1
                heapq.heappush(self.barriers, (target, self.seq, job))

    def enqueue(self, job, d):
        self.stream.append((job, d))
        self.enq += 1
        if not self.gpu_busy:
            self.run_head()

    def run_head(self):
        job, d = self.stream[0]
        self.gpu_busy = True
        self.at(self.now + d, self.complete, job, d)

    def complete(self, job, d):
        self.stream.popleft()
        self.done += 1
        self.gpu_busy = False
        key = getattr(job, "tag", None)
        self.busy_by[key] = self.busy_by.get(key, 0.0) + d
        while self.barriers and self.barriers[0][0] <= self.done:
            _, _, bj = heapq.heappop(self.barriers)
            self.at(self.now, self.step, bj)
        # free slot(s) -> blocked launches in the order they blocked
        while self.blocked and len(self.stream) < self.p["Q"]:
            bj, bd = self.blocked.popleft()
            self.stream.append((bj, bd))
            self.enq += 1
            self.at(self.now, self.step, bj)
        if self.stream:
            self.run_head()

    def run(self, until, stop=lambda: False):
        while self.ev:
            t, _, fn, a = heapq.heappop(self.ev)
            if t > until:
                break
            self.now = t
            fn(*a)
            if stop():
                break


class Tagged:
    """generator wrapper carrying a tag (for busy-time accounting)."""
    def __init__(self, gen, tag):
        self.gen, self.tag = gen, tag

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.gen)


# ---------------------------------------------------------------- job profiles
def train_profile(model, gpu, p):
    T = train_step_s(model, gpu)
    K = MODELS[model]["gpu_kernels_per_train_step"]
    copy = 32 * 3 * 224 * 224 * 4 / p["PCIE"]
    fixed = copy + 2 * p["EPS"] + p["O_STEP"]
    shape = lognormal_sizes(K, zlib.crc32(("train" + model).encode()), p["SIGMA"])
    if p["PHASED"]:
        shape = phased(shape, MODELS[model]["gpu_kernels_train_breakdown"], p["OPT_SHARE"])
    h = p["H_TRAIN"]
    if model == "keras_mobilenet_v2" and p["MBV2_HOSTBOUND"] > 0:
        # hypothesis test only (not part of the mechanism): MobileNetV2's training host-paced,
        # its GPU work a fraction MBV2_HOSTBOUND of the step, host work per op filling the step
        work = p["MBV2_HOSTBOUND"] * (T - fixed)
        durs = [x * work / sum(shape) for x in shape]
        lo, hi = 0.0, (T - fixed) / K * 2
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            if chain_time(durs, mid) < T - fixed:
                lo = mid
            else:
                hi = mid
        return dict(model=model, T=T, K=K, durs=durs, copy=copy, gpu_bound=False, h=lo)
    durs, ok = scaled(shape, T - fixed, h)
    return dict(model=model, T=T, K=K, durs=durs, copy=copy, gpu_bound=ok)


def phased(shape, breakdown, opt_share):
    """Hypothesis test only: the step's kernels in phase order, sized by phase (forward 1/3,
    backward 2/3 of the non-optimizer work; each optimizer update opt_share / count), the updates
    spread evenly through the backward pass (each follows its gradient)."""
    f = breakdown["forward"]
    b = breakdown["backward"] + breakdown["gradient_addn"]
    o = breakdown["optimizer"]
    fwd = [x / sum(shape[:f]) * (1 - opt_share) / 3 for x in shape[:f]]
    bwd = [x / sum(shape[f:f + b]) * (1 - opt_share) * 2 / 3 for x in shape[f:f + b]]
    out, j = list(fwd), 0
    for i, x in enumerate(bwd):
        out.append(x)
        while j < o and (j + 1) * b <= (i + 1) * o:
            out.append(opt_share / o)
            j += 1
    return out + [opt_share / o] * (o - j)


def solo_request(segs, h, eps):
    """Solo latency (device part) of a request: segments separated by barriers."""
    return sum(chain_time(seg, h) + eps for seg in segs)


def infer_profile(model, p, gpu="rtx2080ti"):
    """BS-1 request.  INF_MODE 'gpu': host H per op, kernels sized so the request alone takes the
    Fig. 6 SwitchFlow bar (GPU-paced).  INF_MODE 'flops': the request's GPU work is its FLOPs at
    F_EFF (min 90 % of the time), the rest is host dispatch: per-op host time solved so the request
    alone takes the SwitchFlow bar (host-paced, as BS-1 graphs and the NMT's while loops are)."""
    T = infer_s(model, gpu)
    if model == "nmt_wmt16":
        n = int(p["NMT_SYNCS"])
        enc, dec = 87 * 30, 125
        sizes = [enc + dec] + [dec] * (n - 1)
        copy = 0.0
    else:
        sizes = [MODELS[model]["gpu_kernels_per_inference"]]
        copy = 3 * 224 * 224 * 4 / p["PCIE"]
    K = sum(sizes)
    fixed = copy + p["EPS"] + p["O_INF"]
    target = T - fixed
    shape = lognormal_sizes(K, zlib.crc32(("infer" + model).encode()), p["SIGMA"])

    def split(durs):
        out, i = [], 0
        for n_ in sizes:
            out.append(durs[i:i + n_])
            i += n_
        return out

    if p["INF_MODE"] == "flops":
        gflop = 2.0 * MODELS[model]["gmacs_per_image"]
        work = min(0.9 * target, gflop * 1e9 / p["F_EFF"])
        durs = [x * work / sum(shape) for x in shape]
        segs = split(durs)
        lo, hi = 0.0, target / K * 2
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            if solo_request(segs, mid, p["EPS"]) < target:
                lo = mid
            else:
                hi = mid
        return dict(model=model, T=T, K=K, segments=segs, copy=copy, h=lo, gpu_s=work)
    h = p["H"]
    lo, hi = 0.0, target / sum(shape) * 3
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if solo_request(split([x * mid for x in shape]), h, p["EPS"]) < target:
            lo = mid
        else:
            hi = mid
    segs = split([x * lo for x in shape])
    return dict(model=model, T=T, K=K, segments=segs, copy=copy, h=h, gpu_s=sum(map(sum, segs)))


def train_job(prof, p, log, jitter_seed=0):
    rng = random.Random(jitter_seed)
    h = prof.get("h", p["H_TRAIN"])
    while True:
        yield ("delay", p["O_STEP"] * (0.5 + rng.random()))   # session overhead, jittered
        yield ("barrier",)                                    # H2D of the batch waits for the stream
        yield ("delay", prof["copy"] + p["EPS"])
        f = 1.0 + p["JITTER"] * rng.gauss(0.0, 1.0)           # step-to-step variation
        for d in prof["durs"]:
            yield ("host", h * (1.0 + p["JITTER"] * rng.gauss(0.0, 1.0)))
            yield ("launch", d * f)
        yield ("barrier",)                                    # fetch loss + sync_on_finish
        yield ("delay", p["EPS"])
        log.append(sim_now[0]())


def infer_job(prof, p, n, log, seed=7):
    rng = random.Random(seed)
    for _ in range(n):
        t0 = sim_now[0]()
        yield ("delay", p["O_INF"] * (0.25 + 0.5 * rng.random()))
        yield ("barrier",)                                    # H2D of the feed
        yield ("delay", prof["copy"] + p["EPS"])
        for k, seg in enumerate(prof["segments"]):
            for d in seg:
                yield ("host", prof["h"] * (1.0 + p["JITTER"] * rng.gauss(0.0, 1.0)))
                yield ("launch", d)
            yield ("barrier",)                                # loop-condition / output fetch + sync
            yield ("delay", p["EPS"])
        yield ("delay", p["O_INF"] * 0.5)
        log.append(sim_now[0]() - t0)


sim_now = [None]


def run_fig6(bg, inf, p, gpu="rtx2080ti", n_req=103, seeds=(1, 2, 3), warm=1.0):
    tp = train_profile(bg, gpu, p)
    ip = infer_profile(inf, p, gpu)
    p95s, solo = [], None
    for s in seeds:
        sim = Sim(p)
        sim_now[0] = lambda: sim.now
        tl, il = [], []
        sim.start(Tagged(train_job(tp, p, tl, s), "train"), 0.0)
        start = warm + random.Random(s).random() * tp["T"]
        sim.start(Tagged(infer_job(ip, p, n_req, il, s + 7), "infer"), start)
        sim.run(1e9, stop=lambda: len(il) >= n_req)
        meas = sorted(il[3:])
        if inf == "nmt_wmt16":
            p95s.append((sum(meas) / len(meas),) * 2)
        else:
            p95s.append((sum(il[3:98]) / 95, meas[math.ceil(0.95 * len(meas)) - 1]))
    mean95 = sum(x[0] for x in p95s) / len(p95s)
    p95 = sum(x[1] for x in p95s) / len(p95s)
    return (mean95, p95) if p.get("BOTH") else (mean95 if p["STAT"] == "mean95" else p95)


def solo_infer(inf, p, gpu="rtx2080ti"):
    ip = infer_profile(inf, p, gpu)
    sim = Sim(p)
    sim_now[0] = lambda: sim.now
    il = []
    sim.start(Tagged(infer_job(ip, p, 5, il), "infer"))
    sim.run(1e9)
    return il[-1]


def run_fig7(bg, partner, gpu, p, steps=40, seed=1):
    a = train_profile(bg, gpu, p)
    b = train_profile(partner, gpu, p)
    sim = Sim(p)
    sim_now[0] = lambda: sim.now
    la, lb = [], []
    sim.start(Tagged(train_job(a, p, la, seed), "bg"), 0.0)
    sim.start(Tagged(train_job(b, p, lb, seed + 100), "partner"), 1.0 + random.Random(seed).random() * 0.2)
    sim.run(1e9, stop=lambda: len(lb) >= steps + 3)
    t0, t1 = lb[2], lb[-1]
    n_b = len(lb) - 3
    n_a = sum(1 for t in la if t0 < t <= t1)
    return 32 * n_a / (t1 - t0), 32 * n_b / (t1 - t0)


# ---------------------------------------------------------------- evaluation
def short(m):
    return m.replace("keras_", "").replace("inception_resnet_v2", "incresv2").replace("inception_v3", "incv3")


def evaluate(p, quick=False, verbose=True):
    rows = []  # (panel, case, paper, model)
    seeds = (1,) if quick else (1, 2, 3)
    for panel in PAPER["fig6"]["panels"]:
        if panel["panel"] not in ("a", "b", "d"):
            continue
        for r in panel["rows"]:
            bg = panel.get("background", r.get("background"))
            inf = panel.get("inference", r.get("inference"))
            nreq = 103 if inf != "nmt_wmt16" else (5 if quick else 6)
            q = dict(p, BOTH=True)
            m95, p95 = run_fig6(bg, inf, q, n_req=nreq, seeds=seeds)
            main, alt = (m95, p95) if p["STAT"] == "mean95" else (p95, m95)
            rows.append(("6" + panel["panel"], f"{short(inf)} / {short(bg)} train", r["tf_ms"], main * 1e3, alt * 1e3))
    for panel in PAPER["fig7"]["panels"]:
        if panel["panel"] not in ("a", "b"):
            continue
        for r in panel["rows"]:
            if r.get("oom"):
                continue
            bgv, pv = run_fig7(panel["background"], r["partner"], panel["gpu"], p, steps=20 if quick else 40)
            rows.append(("7" + panel["panel"], f"{short(panel['background'])} bg (+{short(r['partner'])})", r["background"], bgv, None))
            rows.append(("7" + panel["panel"], f"{short(r['partner'])} partner", r["partner_corun"], pv, None))
    return rows


def table(rows, stat, tol=0.25, verbose=True):
    """rows: (panel, case, paper, model, model under the other Fig. 6 statistic or None)."""
    alt_name = "p95" if stat == "mean95" else "mean95"
    by, by_alt = {}, {}
    out = []
    for panel, case, paper, model, alt in rows:
        err = (model - paper) / paper
        ok = abs(err) <= tol
        by.setdefault(panel, [0, 0])
        by[panel][1] += 1
        by[panel][0] += ok
        a = model if (alt is None or panel == "6d") else alt
        by_alt.setdefault(panel, [0, 0])
        by_alt[panel][1] += 1
        by_alt[panel][0] += abs((a - paper) / paper) <= tol
        alt_s = "" if (alt is None or panel == "6d") else f"{alt:.4g} ({(alt - paper) / paper * 100:+.0f} %)"
        out.append(f"| {panel} | {case} | {paper:.4g} | {model:.4g} | {err*100:+.0f} % | {'yes' if ok else 'NO'} | {alt_s} |")
    if verbose:
        print(f"| panel | case | paper | model ({stat}) | error | within ±25 % | model {alt_name} |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(out))
        print()
        for name, b in ((stat, by), (alt_name, by_alt)):
            tot = [sum(v[0] for v in b.values()), sum(v[1] for v in b.values())]
            no6a = [sum(v[0] for k, v in b.items() if k != "6a"), sum(v[1] for k, v in b.items() if k != "6a")]
            print(f"Fig. 6 as {name}: within ±25 %: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(b.items()))
                  + f"; all {tot[0]}/{tot[1]} ({100*tot[0]/tot[1]:.0f} %); over 6b, 6d, 7a, 7b (the twin's 21/32 basis):"
                  f" {no6a[0]}/{no6a[1]} ({100*no6a[0]/no6a[1]:.0f} %)")
        f7 = [r for r in rows if r[0].startswith("7")]
        n20 = sum(abs((r[3] - r[2]) / r[2]) <= 0.20 for r in f7)
        print(f"Fig. 7 bars within ±20 % (the fig7 report's bound): {n20}/{len(f7)}")
    return by


PLAIN = dict(Q=1024, INF_MODE="gpu", NMT_SYNCS=32)   # --plain: CUDA's 1024 entries = 1 per op, GPU-paced BS-1


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    for a in sys.argv[1:]:
        if "=" in a:
            k, v = a.split("=")
            P[k] = v if isinstance(P[k], str) else (v == "1" if isinstance(P[k], bool) else type(P[k])(float(v)))
    if "--plain" in sys.argv:
        P.update(PLAIN)
    # the later hypotheses are printed only when set, so that the default output stays results.txt
    hidden = set() if P["PHASED"] else {"PHASED", "OPT_SHARE"}
    if not P["HOST_CONTENTION"]:
        hidden.add("HOST_CONTENTION")
    if not P["HOST_ADD"]:
        hidden.add("HOST_ADD")
    print("parameters:", {k: v for k, v in P.items() if k not in hidden})
    rows = evaluate(P, quick=quick)
    table(rows, P["STAT"])
