#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: tests/fuzz/corpus/<target>/seed-*.

Each seed is a small real input, taken from the repository's data and docs, from the shared
reference data (../shared/data, next to the repository) or written as the documented format says,
prefixed with the target's choice bytes (see each tests/fuzz/<target>_fuzz.cpp). Run it again after
changing a target's input layout; it replaces the seed-* files only (what the fuzzers added is kept).
  tests/fuzz/make_seed_corpus.py [--shared ../shared/data] [--generated DIR]
--generated: a folder with tune.json (gpucap tune --algorithm oracle --gpu p40 --model resnet50
--power-cap 180 --batch-sizes 1,4,16,64 --json), fitted.json (gpucap fit --no-regressor on a
profile like tests/cli/fit_cli_test.cpp's) and profile_small.csv; without it those seeds are kept.
"""
import argparse
import base64
import json
import os
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def seed(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (folder / f"seed-{name}").write_bytes(data)


def b(n):
    return bytes([n])


def lines(path, first, last=None):
    text = Path(path).read_text().splitlines(True)
    return "".join(text[first:last])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--generated")
    args = parser.parse_args()
    for old in CORPUS.glob("*/seed-*"):
        old.unlink()
    shared = Path(args.shared)
    data = ROOT / "data"

    # cap_schedule: byte 0 (bit 0: rate schedule; bit 1: with --power-cap / constant spacing)
    seed("cap_schedule", "batchdvfs", b(0) + b"0:150,85:125,170:100")
    seed("cap_schedule", "after-power-cap", b(2) + b"85:125, 170:100")
    seed("cap_schedule", "serve", b(0) + b"0:250,60:180,120:220")
    seed("cap_schedule", "rate", b(1) + b"0:50,30:100")
    seed("cap_schedule", "rate-constant-pause", b(3) + b"0:20,10:0,20:5.5")

    # cli_values: byte 0 % 16 picks the parser
    for n, (i, text) in enumerate([(0, "http://127.0.0.1:8000/prefix"), (0, "https://[::1]:8443"), (1, "http://h1:2379,http://h2:2379"),
                    (2, "3s"), (2, "10 batches"), (3, "1,2,4,8"), (3, "1..255"), (4, "544,632,734"), (5, "realtime"),
                    (5, "2.5"), (6, "node-7.example.org"), (7, "INPUT__0:3,224,224"), (8, "p40,published,zeus"),
                    (8, "all"), (9, " 1024 "), (10, "-1.5e3"), (11, "batchdvfs"), (11, "overlapped"), (12, "gpucap"),
                    (12, "pruning"), (13, "rack-1"), (14, "aGVsbG8gZXRjZA=="), (15, "0:50,30:100")]):
        seed("cli_values", f"{n:02d}-parser{i}", b(i) + text.encode())

    # share_job: one --job per line
    seed("share_job", "fig6", "fg=infer:keras_resnet50:batch=1:priority=high:requests=100:warmup=3:start=20\n"
                              "bg=train:keras_resnet50:batch=32:until=fg\n")
    seed("share_job", "open-loop", "fg=infer:keras_resnet50:batch=1:priority=high:rate=50:requests=3000:slo_ms=20:start=1\n"
                                   "bg=train:keras_vgg16:batch=32:duration=60:input=jpeg:reuse=a\n")

    # cap_file
    seed("cap_file", "number", "250\n")
    seed("cap_file", "watts", "180.5 W")
    seed("cap_file", "json", '{"watts": 200}\n')

    # data_files: byte 0 % 10 picks the file
    for i, path in [(0, "gpus/p40.json"), (0, "gpus/h100.json"), (1, "models/resnet50.json"), (1, "models/bert_base_seq128.json"),
                    (2, "datasets/imagenet.json"), (3, "matrices/batchdvfs-p40.json"), (4, "matrices/serve-quick.json"),
                    (5, "matrices/cluster-quick.json"), (6, "sched/calibration.json"), (8, "sched/devices.json"),
                    (9, "calibration/real.json")]:
        seed("data_files", path.replace("/", "-"), b(i) + (data / path).read_bytes())

    # p40_log: byte 0 % 4: batchdvfs, clipper, dvfs, nvidia-smi
    p40 = shared / "batchdvfs-p40"
    if p40.is_dir():
        bd = p40 / "batchdvfs" / "01_InceptionV1_BatchDVFS.csv"
        text = Path(bd).read_text().splitlines(True)
        seed("p40_log", "batchdvfs", b(0) + "".join(text[:25] + [" ,\n"] + text[-5:]).encode())
        seed("p40_log", "clipper", b(1) + lines(p40 / "clipper" / "01_InceptionV1_Clipper.csv", 0, 25).encode())
        seed("p40_log", "dvfs", b(2) + lines(p40 / "dvfs256" / "01_InceptionV1_DVFS.csv", 0, 25).encode())
        smi = sorted((p40 / "clipper" / "nvidia-smi").glob("*.csv"))[0]
        seed("p40_log", "nvidia-smi", b(3) + lines(smi, 0, 20).encode())

    # zeus_trace: byte 0 bit 7 clear: a power trace alone; set: train trace, "--", power trace for
    # workload (byte 0 % 8; bit 6: gpucap's optimizer)
    nsdi = shared / "zeus" / "nsdi23"
    if nsdi.is_dir():
        power = Path(nsdi / "summary_power_v100.csv").read_text().splitlines(True)
        train = Path(nsdi / "summary_train.csv").read_text().splitlines(True)
        seed("zeus_trace", "power-v100", b(0) + "".join(power[:30]).encode())
        # librispeech/deepspeech2 (index 2): adamw, target 40.0 (WER), default batch 192
        def pick(rows, dataset, network, optimizer, batches, extra=None):
            out = [rows[0]]
            for r in rows[1:]:
                f = r.split(",")
                if f[0] == dataset and f[1] == network and f[3] == optimizer and int(f[2]) in batches:
                    if extra is None or extra(f):
                        out.append(r)
            return out
        batches = {32, 64, 192}
        t = pick(train, "librispeech", "deepspeech2", "adamw", batches, lambda f: float(f[6]) == 40.0)[:13]
        p = pick(power, "librispeech", "deepspeech2", "adamw", batches)[:19]
        seed("zeus_trace", "deepspeech2", b(0x80 | 2) + "".join(t).encode() + b"--\n" + "".join(p).encode())
        seed("zeus_trace", "deepspeech2-gpucap", b(0xC0 | 2) + "".join(t).encode() + b"--\n" + "".join(p).encode())

    # profile: byte 0 % 2: tune --json, profile CSV
    gen = Path(args.generated) if args.generated else None
    if gen and (gen / "tune.json").exists():
        seed("profile", "tune-json", b(0) + (gen / "tune.json").read_bytes())
        seed("profile", "fit-csv", b(1) + (gen / "profile_small.csv").read_bytes())
    seed("profile", "minimal-json", b(0) + b'{"trials": [{"batch_size": 8, "sm_clock_mhz": 1000, "memory_clock_mhz": null, '
                                          b'"throughput_img_s": 500, "max_power_w": 120}, {"batch_size": 32, '
                                          b'"sm_clock_mhz": 1000, "throughput_img_s": 900, "max_power_w": 170}]}')

    # trial_file: a real sweep
    seed("trial_file", "h200-sweep", (data / "calibration" / "real" / "2026-11-26-NVIDIA_H200" / "sweep-resnet50-fp32.json").read_bytes())

    # predictor_files: byte 0 % 3: fitted predictor, boosted trees, PctoDL parameters
    if gen and (gen / "fitted.json").exists():
        seed("predictor_files", "fitted", b(0) + (gen / "fitted.json").read_bytes())
    pct = shared / "pctodl"
    if pct.is_dir():
        gbr = json.loads((pct / "gbr" / "resnet50" / "a100_mem1215" / "sm_gbr.json").read_text())
        gbr["trees"] = gbr["trees"][:2]
        gbr["n_estimators"] = 2
        seed("predictor_files", "gbr-2-trees", b(1) + json.dumps(gbr).encode())
        seed("predictor_files", "pctodl-params", b(2) + (pct / "params" / "resnet50" / "imagenet_mem5001.json").read_bytes())

    # calibration_setup: byte 0 % 4: published, zeus setup, real setup, sweep
    seed("calibration_setup", "published", b(0) + (data / "calibration" / "published.json").read_bytes())
    seed("calibration_setup", "zeus", b(1) + (data / "calibration" / "zeus.json").read_bytes())
    seed("calibration_setup", "real", b(2) + b'{"folders": [{"path": "real/shipped", "gpu": "h200", "use": "check"}]}')
    seed("calibration_setup", "sweep", b(3) + (data / "calibration" / "real" / "2026-11-26-NVIDIA_H200-run2" /
                                               "sweep-vgg19-fp32.json").read_bytes())

    # restore_journal
    journal = {"version": 1, "entries": [
        {"device": "GPU-fuzz", "control": "GPU_POWER_LIMIT_CONTROL", "original": 250.0, "pid": 999999999, "pid_start_ticks": 1},
        {"device": "GPU-fuzz", "control": "GPU_CORE_FREQUENCY_LOCK_CONTROL", "original": None, "pid": 999999999,
         "pid_start_ticks": 1},
        {"device": "GPU-elsewhere", "control": "GPU_MEMORY_FREQUENCY_LOCK_CONTROL", "original": 5001.0, "pid": 1,
         "pid_start_ticks": 0}]}
    seed("restore_journal", "three-entries", json.dumps(journal, indent=2) + "\n")

    # bso_api: requests "route byte + text", separated by "\n~\n"
    job = ('{"max_power": 250.0, "number_of_gpus": 1, "gpu_model": "NVIDIA A40", "job_id": "job-1", "job_id_prefix": "job", '
           '"batch_sizes": [16, 32, 64], "default_batch_size": 32, "eta_knob": 0.5, "beta_knob": 2.0, "target_metric": 0.5, '
           '"higher_is_better_metric": true, "max_epochs": 5, "num_pruning_rounds": 2, "window_size": 0, '
           '"mab_prior_mean": 0.0, "mab_prior_precision": 0.0, "mab_num_explorations": 2, "mab_seed": 1}')
    trial = '{"job_id": "job-1", "batch_size": 32, "trial_number": 1'
    steps = [(0, job), (1, "job-1"), (2, trial + ', "time": 10.0, "energy": 1000.0, "metric": 0.1, "current_epoch": 1}'),
             (2, trial + ', "time": 20.0, "energy": 2100.0, "metric": 0.6, "current_epoch": 2}'), (3, trial + "}"),
             (1, "job-1"), (0, job), (4, "job-1"), (5, "")]
    seed("bso_api", "session", b"\n~\n".join(b(r) + t.encode() for r, t in steps))
    seed("bso_api", "generated-id", b(0) + job.replace('"job_id": "job-1"', '"job_id": null').encode() + b"\n~\n" + b(1) + b"job-1")

    # bso_client_answer: byte 0 % 3: registered job, next trial, report answer
    seed("bso_client_answer", "created-job", b(0) + job.encode())
    seed("bso_client_answer", "trial", b(1) + b'{"job_id": "job-1", "batch_size": 32, "trial_number": 1}')
    seed("bso_client_answer", "report", b(2) + b'{"stop_train": false, "converged": false, "message": "keep training"}')

    # kserve_request: byte 0 model (0 simple, 1 image, 2 mixed, 3 fixed), byte 1 framing
    ints = struct.pack("<16i", *range(16))
    simple_json = json.dumps({"id": "1", "inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [[1] * 16]}],
        "outputs": [{"name": "OUTPUT0"}]})
    seed("kserve_request", "simple-json", b(0) + b(0) + simple_json.encode())
    header = json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1"}],
        "parameters": {"binary_data_output": True, "priority": 1, "timeout": 100000}}).encode()
    seed("kserve_request", "simple-binary-line", b(0) + b(2) + str(len(header)).encode() + b"\n" + header + ints + ints)
    seed("kserve_request", "simple-binary-nul", b(0) + b(3) + header + ints + ints)
    seed("kserve_request", "image-raw", b(1) + b(1) + struct.pack("<48f", *[i / 48 for i in range(48)]))
    mixed = json.dumps({"inputs": [
        {"name": "TEXT", "shape": [2, 1], "datatype": "BYTES", "data": ["hello", "w\u00f6rld"]},
        {"name": "MASK", "shape": [2, 2], "datatype": "BOOL", "data": [[True, False], [False, True]]},
        {"name": "HALF", "shape": [2, 2], "datatype": "FP16", "parameters": {"binary_data_size": 8}},
        {"name": "SMALL", "shape": [2, 1], "datatype": "INT8", "data": [-128, 127]},
        {"name": "WIDE", "shape": [2, 3], "datatype": "UINT64", "data": [0, 1, 2, 3, 4, 18446744073709551615]}],
        "outputs": [{"name": "LABEL"}, {"name": "B16", "parameters": {"binary_data": True}}]}).encode()
    seed("kserve_request", "mixed", b(2) + b(3) + mixed + b"\0\x3c\0\x3c\0\xbc\x00\x00")
    fixed = json.dumps({"inputs": [{"name": "X", "shape": [2, 2], "datatype": "UINT16", "data": [1, 2, 3, 65535]},
                                   {"name": "Y", "shape": [3], "datatype": "FP64", "data": [0.5, -1e300, 3]}]}).encode()
    seed("kserve_request", "fixed", b(3) + b(0) + fixed)
    # json.dumps writes nan and inf as NaN and Infinity, as tritonclient (python-rapidjson) does; the outputs
    # asked for as classes (Triton's classification extension).
    image_classes = json.dumps({"inputs": [{"name": "input", "shape": [1, 3, 4, 4], "datatype": "FP32",
                                            "data": [float("nan"), float("inf"), float("-inf")] + [0.5] * 45}],
                                "outputs": [{"name": "output", "parameters": {"classification": 3, "binary_data": True}}]})
    seed("kserve_request", "image-nan-classes", b(1) + b(0) + image_classes.encode())
    fixed_classes = json.dumps({"inputs": [{"name": "X", "shape": [2, 2], "datatype": "UINT16", "data": [1, 2, 3, 4]},
                                           {"name": "Y", "shape": [2], "datatype": "FP64", "data": [-float("inf"), 1]}],
                                "outputs": [{"name": "Z", "parameters": {"classification": 2}},
                                            {"name": "W", "parameters": {"classification": 0}}]}).encode()
    seed("kserve_request", "fixed-classes", b(3) + b(0) + fixed_classes)

    # kserve_client: byte 0 bit 0: error answer; else a --shape line, then the metadata
    simple_meta = json.dumps({"name": "simple", "versions": ["1"], "platform": "pytorch_libtorch",
                              "inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [-1, 16]},
                                         {"name": "INPUT1", "datatype": "INT32", "shape": [-1, 16]}],
                              "outputs": [{"name": "OUTPUT0", "datatype": "INT32", "shape": [-1, 16]}]})
    seed("kserve_client", "simple", b(0) + b"\n" + simple_meta.encode())
    seed("kserve_client", "simple-binary-batch", b(0x0A) + b"\n" + simple_meta.encode())
    var_meta = json.dumps({"name": "text", "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [-1, -1]},
                                                      {"name": "IMG", "datatype": "FP32", "shape": [3, -1]}],
                           "outputs": [{"name": "OUT", "datatype": "FP16", "shape": [-1, 2]}]})
    seed("kserve_client", "shape", b(0) + b"TEXT:4\n" + var_meta.encode())
    seed("kserve_client", "error", b(1) + b'{"error": "Request for unknown model: \'resnet\' is not found"}')

    # arrival_trace
    seed("arrival_trace", "times", "# seconds\n0\n0.01\n0.5\n0.5\n1.25\n")
    seed("arrival_trace", "csv", "request,time_s,size\n1,0.0,3\n2,0.2,1\n3,0.9,2\n")

    # etcd_answer: byte 0 % 7: range, grant, keepalive, txn, put, error (status from byte 0 >> 3), watch
    header_json = {"cluster_id": "14841639068965178418", "member_id": "10276657743932975437", "revision": "42",
                   "raft_term": "3"}
    def kv(key, value, lease=None):
        out = {"key": base64.b64encode(key.encode()).decode(), "create_revision": "7", "mod_revision": "42",
               "version": "3", "value": base64.b64encode(value.encode()).decode()}
        if lease:
            out["lease"] = lease
        return out
    node = kv("/gpucap/rack/nodes/n1", '{"cap_in_force_w":250,"incarnation":7587}', "7587862071294531332")
    seed("etcd_answer", "range", b(0) + json.dumps({"header": header_json, "kvs": [node, kv("/gpucap/rack/budget", '{"budget_w":500}')],
                                                    "count": "2"}).encode())
    seed("etcd_answer", "grant", b(1) + json.dumps({"header": header_json, "ID": "7587862071294531332", "TTL": "10"}).encode())
    seed("etcd_answer", "keepalive", b(2) + json.dumps({"result": {"header": header_json, "ID": "7587862071294531332",
                                                                   "TTL": "10"}}).encode())
    seed("etcd_answer", "txn", b(3) + json.dumps({"header": header_json, "succeeded": True,
                                                  "responses": [{"response_put": {"header": header_json}}]}).encode())
    seed("etcd_answer", "put", b(4) + json.dumps({"header": header_json}).encode())
    seed("etcd_answer", "lease-not-found", b(5 | (0x0B << 3)) + json.dumps(
        {"error": "etcdserver: requested lease not found", "code": 5, "message": "etcdserver: requested lease not found"}).encode())
    seed("etcd_answer", "no-leader", b(5 | (0x0F << 3)) + b'{"error":"etcdserver: no leader","code":14,"message":"etcdserver: no leader"}')
    watch = [{"result": {"header": header_json, "created": True}},
             {"result": {"header": header_json, "events": [{"kv": node}, {"type": "DELETE", "kv": kv("/gpucap/rack/ack/n2", "")}]}},
             {"result": {"header": header_json, "compact_revision": "40", "canceled": True}}]
    seed("etcd_answer", "watch", b(6) + "\n".join(json.dumps(w) for w in watch).encode() + b"\n")

    # cluster_records: records "kind byte + text" separated by "\n" (0 node, 1 alloc, 2 ack, 3 budget, 4 report)
    node_record = ('{"cap_in_force_w":250,"curve":{"max_cap_w":300,"min_cap_w":100,"points":[[100,400,1],[200,900,0.99],'
                   '[300,1100,0.97]],"priority":1,"tdp_w":300},"gpu":"a100","incarnation":7587862071294531332,"model":"vgg19",'
                   '"safe_cap_w":150}')
    node2 = ('{"cap_in_force_w":0,"curve":{"max_cap_w":250,"min_cap_w":125,"points":[[120,100,1],[180,300,1],[250,310,0.5]],'
             '"priority":2,"tdp_w":250},"gpu":"p40","incarnation":12,"model":"resnet50","safe_cap_w":125}')
    records = [(0, node_record), (0, node2), (1, '{"bound_w":250,"cap_w":200,"incarnation":12,"safe_cap_w":125}'),
               (2, '{"cap_w":200,"incarnation":12,"leaving":false,"revision":42}'), (3, '{"budget_w":420}'),
               (4, '{"cap_w":200,"power_w":187.5,"throughput_rps":310.2,"slo_attainment":0.995,"unix_s":1764300000.25,'
                   '"gpu":"a100","model":"vgg19","simulated":true}')]
    seed("cluster_records", "cluster", b"\n".join(b(k) + t.encode() for k, t in records))

    # mps_protocol: byte 0 % 2: command (to a worker), message (from a worker)
    seed("mps_protocol", "run", b(0) + b'{"cmd":"run","batch":16,"warmup_s":2,"measure_s":3}')
    seed("mps_protocol", "quit", b(0) + b'{"cmd":"quit"}')
    seed("mps_protocol", "ready", b(1) + b'{"type":"ready","share_pct":25,"engine":"LibTorch m.pt (cuda, fp16)"}')
    seed("mps_protocol", "result", b(1) + b'{"type":"result","images":4800,"seconds":3.01,"batch":16}')
    seed("mps_protocol", "error", b(1) + b'{"type":"error","message":"CUDA out of memory"}')


if __name__ == "__main__":
    main()
