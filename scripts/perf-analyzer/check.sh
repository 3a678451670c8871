#!/usr/bin/env bash
# Triton's perf_analyzer, unchanged, against `gpucap serve` on the twin (127.0.0.1 only): closed
# loop at concurrency 1-4 (batch 1 and 2), an open-loop request rate, binary and JSON tensors.
# Each run must exit 0 without an error line, and the server must answer every request it was
# sent (none shed, refused or failed) and exit 0 on SIGTERM.
#
#   scripts/perf-analyzer/check.sh PERF_ANALYZER GPUCAP [OUT_DIR]
#
# PERF_ANALYZER: the binary (build.sh makes one; pip's perf-analyzer works too). Each run's output
# goes to OUT_DIR (default: a temporary folder); one line per run on stdout; exit 0 if all passed.
# GPUCAP_PORT (default 18100): the server's port on 127.0.0.1.
set -uo pipefail
if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 PERF_ANALYZER GPUCAP [OUT_DIR]" >&2
  exit 2
fi
pa=$1; gpucap=$2
out=${3:-$(mktemp -d)}
mkdir -p "$out"
port=${GPUCAP_PORT:-18100}
url=127.0.0.1:$port

"$gpucap" serve --gpu a100 --model resnet50 --power-cap 250 --slo-ms 100 --listen "$url" >"$out/serve.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null' EXIT
for _ in $(seq 100); do
  kill -0 $server 2>/dev/null || break
  curl -sf --max-time 1 "http://$url/v2/health/ready" >/dev/null && break
  sleep 0.1
done
# Ours, not another server on the port: it must still run.
if ! kill -0 $server 2>/dev/null || ! curl -sf --max-time 1 "http://$url/v2/health/ready" >/dev/null; then
  echo "check.sh: gpucap serve is not ready on $url (GPUCAP_PORT=... picks another port): $(tail -1 "$out/serve.log")" >&2
  exit 2
fi

failed=0
run() {
  local name=$1; shift
  timeout --foreground 180 "$pa" -m resnet50 -u "$url" -i http -p 3000 "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  local last
  last=$(grep -E "^(Concurrency|Request Rate): " "$out/$name.txt" | tail -1)
  if [[ $rc -eq 0 ]] && ! grep -qi "error" "$out/$name.txt"; then
    echo "PASS $name: $last"
  else
    echo "FAIL $name (exit $rc): $(grep -i error "$out/$name.txt" | head -1)"
    failed=1
  fi
}
run concurrency-1-4 --concurrency-range 1:4
run batch-2 -b 2 --concurrency-range 1:4
run rate-50 --request-rate-range 50
run binary-zero --shape input:3,224,224 --input-data zero --input-tensor-format binary
run json-zero --shape input:3,224,224 --input-data zero --input-tensor-format json --output-tensor-format json

kill -TERM $server
wait $server
rc=$?
trap - EXIT
# The server's summary after SIGTERM: "  requests   33269  [simulated]", "  answered ...", ...
count() { awk -v key="$1" 'index($0, "  " key " ") == 1 { print $(NF - 1); exit }' "$out/serve.log"; }
requests=$(count requests); answered=$(count answered); shed=$(count "shed (429)"); lost=$(count "refused or failed")
summary="requests $requests, answered $answered, shed $shed, refused or failed $lost"
if [[ $rc -ne 0 ]]; then
  echo "FAIL gpucap serve exited $rc on SIGTERM"; failed=1
elif [[ -z $requests || $requests -eq 0 || $answered != "$requests" || $shed != 0 || $lost != 0 ]]; then
  echo "FAIL gpucap serve did not answer every request: $summary"; failed=1
else
  echo "PASS gpucap serve: $summary"
fi
echo "outputs in $out"
exit $failed
