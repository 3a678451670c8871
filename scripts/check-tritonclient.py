#!/usr/bin/env python3
"""Triton's own Python HTTP client (tritonclient.http) against a KServe v2 server: by default a
`gpucap serve` on the twin that this script starts on 127.0.0.1 and stops (SIGTERM) at the end.

tritonclient is not packaged in Debian, so this check is not part of the test suite (the tests
send what its code sends instead). Run it where tritonclient is importable: `pip install
'tritonclient[http]'`, or its source (github.com/triton-inference-server/client,
src/python/library) on PYTHONPATH with Debian's python3-geventhttpclient, python3-rapidjson and
python3-numpy:

    PYTHONPATH=CLIENT/src/python/library /usr/bin/python3 scripts/check-tritonclient.py --gpucap build-ci/gpucap
    # a gpucap serve already running (a real GPU's, say):
    PYTHONPATH=... /usr/bin/python3 scripts/check-tritonclient.py --url 127.0.0.1:8000 --model resnet50

With --url the model must take one FP32 input with a leading batch dimension (the checks send
FP32 data, and INT32 as the wrong datatype); it was run against gpucap's twin server only.

Each call the client makes prints PASS or FAIL with what came back; exit 0 when all passed.
"""

import argparse
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


class Checks:
    def __init__(self):
        self.results = []

    def __call__(self, name, ok, detail=None):
        self.results.append(bool(ok))
        shown = "" if detail is None else f": {detail}"
        print(f"{'PASS' if ok else 'FAIL'} {name}{shown}", flush=True)

    def error(self, name, call, status):
        """The call must raise InferenceServerException with this HTTP status."""
        try:
            call()
        except InferenceServerException as e:
            self(name, str(e.status()) == str(status), f"{e.status()} {e.message()}")
            return
        self(name, False, "no error raised")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_twin_server(gpucap, gpu, model):
    port = free_port()
    args = [gpucap, "serve", "--gpu", gpu, "--model", model, "--power-cap", "250",
            "--slo-ms", "100", "--listen", f"127.0.0.1:{port}"]
    log = tempfile.TemporaryFile(mode="w+")  # its stderr, read only if it fails to start
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, text=True)
    url = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            log.seek(0)
            sys.exit(f"check-tritonclient: gpucap serve exited {server.returncode}: {log.read().strip()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return server, url
        except OSError:
            time.sleep(0.1)
    server.kill()
    sys.exit("check-tritonclient: gpucap serve did not listen within 30 s")


def check_server(client, model, check):
    check("is_server_live", client.is_server_live())
    check("is_server_ready", client.is_server_ready())
    meta = client.get_server_metadata()
    check("get_server_metadata", "name" in meta and "extensions" in meta, meta.get("extensions"))
    check("is_model_ready", client.is_model_ready(model))
    model_meta = client.get_model_metadata(model)
    first_input = model_meta["inputs"][0]
    check("get_model_metadata (batch dimension -1)", first_input["shape"][0] == -1, first_input)
    config = client.get_model_config(model)
    check("get_model_config", config.get("max_batch_size", 0) >= 1, f"max_batch_size {config.get('max_batch_size')}")
    return model_meta


def check_inference(client, model, model_meta, check):
    input_meta, output_meta = model_meta["inputs"][0], model_meta["outputs"][0]
    shape = [2] + input_meta["shape"][1:]
    want_shape = tuple([2] + output_meta["shape"][1:])
    x = np.random.default_rng(1).random(shape, dtype=np.float32)

    def infer_input(binary):
        tensor = httpclient.InferInput(input_meta["name"], shape, input_meta["datatype"])
        tensor.set_data_from_numpy(x, binary_data=binary)
        return tensor

    for binary in (False, True):
        requested = httpclient.InferRequestedOutput(output_meta["name"], binary_data=binary)
        result = client.infer(model, [infer_input(binary)], outputs=[requested], request_id="7")
        y = result.as_numpy(output_meta["name"])
        check(f"infer, {'binary' if binary else 'JSON'} input and output",
              y is not None and y.shape == want_shape and result.get_response()["id"] == "7",
              None if y is None else f"output {y.shape}, id {result.get_response().get('id')!r}")
    result = client.infer(model, [infer_input(True)])
    y = result.as_numpy(output_meta["name"])
    check("infer, no output named (every output)", y is not None and y.shape == want_shape)
    requested = httpclient.InferRequestedOutput(output_meta["name"], class_count=3)
    classes = client.infer(model, [infer_input(True)], outputs=[requested]).as_numpy(output_meta["name"])
    check("infer, classification extension (class_count=3)", classes is not None and classes.shape == (2, 3),
          None if classes is None else list(classes[0]))
    pending = [client.async_infer(model, [infer_input(True)]) for _ in range(8)]
    answers = [p.get_result().as_numpy(output_meta["name"]) for p in pending]
    check("async_infer, 8 in flight", all(a is not None and a.shape == want_shape for a in answers))
    y = client.infer(model, [infer_input(True)], priority=1, timeout=1_000_000).as_numpy(output_meta["name"])
    check("infer with priority and timeout parameters", y is not None and y.shape == want_shape)

    wrong_shape = httpclient.InferInput(input_meta["name"], [2, 3, 7, 7], input_meta["datatype"])
    wrong_shape.set_data_from_numpy(np.zeros((2, 3, 7, 7), np.float32), binary_data=True)
    check.error("wrong shape -> 400", lambda: client.infer(model, [wrong_shape]), 400)
    wrong_type = httpclient.InferInput(input_meta["name"], shape, "INT32")
    wrong_type.set_data_from_numpy(x.astype(np.int32), binary_data=True)
    check.error("wrong datatype -> 400", lambda: client.infer(model, [wrong_type]), 400)
    check.error("unknown model -> 404", lambda: client.infer("no_such_model", [infer_input(True)]), 404)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="host:port of a running server (default: start a twin gpucap serve)")
    parser.add_argument("--gpucap", default="build-ci/gpucap", help="the gpucap binary (when starting the server)")
    parser.add_argument("--gpu", default="a100")
    parser.add_argument("--model", default="resnet50")
    args = parser.parse_args()

    server, url = (None, args.url) if args.url else start_twin_server(args.gpucap, args.gpu, args.model)
    check = Checks()
    try:
        client = httpclient.InferenceServerClient(url=url, concurrency=4)
        model_meta = check_server(client, args.model, check)
        check_inference(client, args.model, model_meta, check)
        client.close()
    finally:
        if server is not None:
            server.terminate()
            try:
                check("gpucap serve exits 0 on SIGTERM", server.wait(timeout=30) == 0)
            except subprocess.TimeoutExpired:
                server.kill()
                check("gpucap serve exits 0 on SIGTERM", False, "still running 30 s after SIGTERM: killed")
    passed = sum(check.results)
    print(f"{passed} of {len(check.results)} checks passed (tritonclient against {url})")
    return 0 if passed == len(check.results) else 1


if __name__ == "__main__":
    sys.exit(main())
