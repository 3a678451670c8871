#!/usr/bin/env bash
# gpucap serve's own overhead on loopback, with gpucap load on the same machine (docs/benchmarks.md,
# "gpucap serve"). Prints a Markdown table of what it measured:
#   1. requests/s of the no-op model with 16-float JSON inputs (the static setting: no queue delay,
#      so a request waits only for the server): open loop at RATE (default 5000/s) for DURATION s,
#      and the most a closed loop of CLIENTS clients gets;
#   2. what a 1x3x224x224 FP32 input through Triton's binary extension adds to a request's p99:
#      the no-op model with that input shape against the 16-float JSON request, both at 100/s,
#      end to end (gpucap load) and in the server (its gpucap_serve_request_duration_seconds
#      histogram: from a request's first byte to its answer; gpucap_serve_request_processing_seconds:
#      from the end of its body, the server's own work);
#   3. how fast shed requests get their 429: the twin of a P40 serving NASNet-A Large under 90 W
#      (about 30 images/s) offered 150 requests/s, end to end and in the server; and the server's
#      peak memory then (its queue is bounded, so its memory should be too) against the 100/s run's.
# Percentiles from the server's histogram are read as Prometheus's histogram_quantile does (linear
# within the bucket), beside the share of requests within the bucket bound the issue names.
# Each load starts with a warm-up of WARMUP s (default 3) whose requests are sent but counted
# neither by gpucap load (--warmup) nor in the server's figures (its histograms are read just after
# the warm-up and at the end of the run, and the difference is used): a server's first requests
# open its connections and first touch its workers' memory (on a 2-core VM, up to a few hundred
# ms for the first 0.5 s of megabyte bodies).
#
#   GPUCAP=build-ci/gpucap benchmarks/serve_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
gpucap=${GPUCAP:-build/gpucap}
rate=${RATE:-5000}
duration=${DURATION:-20}
warmup=${WARMUP:-3}
run_s=$(python3 -c "print($duration + $warmup)")
clients=${CLIENTS:-16}
scratch=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$scratch"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts a server with the given flags; sets $url once it is ready.
serve() {
  local port
  port=$(free_port)
  "$gpucap" serve --listen "127.0.0.1:$port" "$@" >"$scratch/serve.out" 2>"$scratch/serve.err" &
  server=$!
  for _ in $(seq 1 600); do
    grep -q "stop with Ctrl-C" "$scratch/serve.out" 2>/dev/null && break
    sleep 0.1
  done
  url="http://127.0.0.1:$port"
}
stop() { kill -TERM "$server"; wait "$server" || true; }
# The server's peak resident memory so far (VmHWM), MiB.
peak_mib() { awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$server/status" 2>/dev/null || echo "?"; }
field() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

# measure OUT LOAD_FLAGS...: gpucap load for the warm-up and DURATION s after it, its JSON report
# in OUT; with a metrics address, the server's histograms 0.3 s after the warm-up's end
# ($scratch/before: gpucap load's clock starts a little after its process, once it has read the
# model's metadata and built its request) and at the run's end ($scratch/after).
measure() {
  local out=$1
  shift
  "$gpucap" load --url "$url" --duration "$run_s" --warmup "$warmup" --json "$@" >"$out" &
  local load=$!
  if [ -n "${metrics_port:-}" ]; then
    sleep "$(python3 -c "print($warmup + 0.3)")"
    curl -s "http://127.0.0.1:$metrics_port/metrics" >"$scratch/before"
  fi
  wait "$load"
  if [ -n "${metrics_port:-}" ]; then curl -s "http://127.0.0.1:$metrics_port/metrics" >"$scratch/after"; fi
}

echo "| figure | value | command |"
echo "|---|---:|---|"

serve --model noop --power-cap 250 --max-batch-size 64 --algorithm static
measure "$scratch/open.json" --model noop --rate "$rate"
measure "$scratch/closed.json" --model noop --clients "$clients"
stop
echo "| noop, 16-float JSON, open loop at ${rate}/s: answered/s | $(field "$scratch/open.json" "round(d['throughput_rps'])") (p99 $(field "$scratch/open.json" "round(d['latency_ms']['p99'],1)") ms, failed $(field "$scratch/open.json" "d['failed']")$(field "$scratch/open.json" "''.join(f': {e[\"count\"]} x ' + ' '.join(e[\"message\"].replace('|', '/').split()) for e in d['errors'] if e.get('status', 0) not in (429, 503)) + (f' (+{d[\"other_errors\"]} other)' if d.get('other_errors') else '')"), unsent $(field "$scratch/open.json" "d.get('unsent',0)")) | \`gpucap load --model noop --rate $rate --duration $run_s --warmup $warmup\` |"
echo "| noop, 16-float JSON, closed loop, $clients clients: answered/s | $(field "$scratch/closed.json" "round(d['throughput_rps'])") | \`gpucap load --model noop --clients $clients --duration $run_s --warmup $warmup\` |"

# server_time OUTCOME BOUND_S [FAMILY]: from one of the server's histograms (default: duration, from
# the first byte) over the measured window (after the warm-up: $scratch/after minus
# $scratch/before), "p99 P ms, S % within BOUND ms" (P as histogram_quantile(0.99) computes it;
# S exact, BOUND being one of the histogram's bounds).
server_time() {
  python3 - "$scratch/before" "$scratch/after" "$1" "$2" "${3:-duration}" <<'PY'
import re, sys
before_file, after_file, outcome, bound, family = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
texts = [open(before_file).read(), open(after_file).read()]
def buckets(text):
    pattern = r'gpucap_serve_request_%s_seconds_bucket\{[^}]*outcome="%s",le="([^"]+)"\} (\S+)' % (family, outcome)
    return {float(m.group(1)): float(m.group(2)) for m in re.finditer(pattern, text)}
first, last = buckets(texts[0]), buckets(texts[1])
window = [(upper, count - first.get(upper, 0.0)) for upper, count in sorted(last.items())]
total = window[-1][1] if window else 0.0
if total <= 0:  # e.g. the first reading answered only after the load (a server swamped at its start)
    print(f"no {outcome} request between the two readings of the server's metrics")
    sys.exit(0)
rank, lower, below = 0.99 * total, 0.0, 0.0
for upper, count in window:
    if count >= rank:
        p99 = upper if upper == float('inf') else lower + (upper - lower) * (rank - below) / max(count - below, 1e-12)
        break
    lower, below = upper, count
within = next(count for upper, count in window if abs(upper - bound) < 1e-12) / total
line = f"p99 {p99 * 1e3:.2f} ms, {100 * within:.1f} % within {bound * 1e3:g} ms ({int(total)} requests)"
if outcome == "success" and family == "duration":  # Triton's counters: from the body's end
    def value(name):
        return [float((re.search(name + r'\{[^}]*\} (\S+)', t) or [0, 0])[1]) for t in texts]
    duration_us, success = value('nv_inference_request_duration_us'), value('nv_inference_request_success')
    line += f"; mean from the body's arrival {(duration_us[1] - duration_us[0]) / (success[1] - success[0]):.0f} us"
print(line)
PY
}

metrics_port=$(free_port)
serve --model noop --power-cap 250 --max-batch-size 64 --algorithm static --metrics "127.0.0.1:$metrics_port"
measure "$scratch/json16.json" --model noop --rate 100
json16_server=$(server_time success 0.001)
json16_processing=$(server_time success 0.001 processing)
stop
serve --model noop --noop-shape 3,224,224 --power-cap 250 --max-batch-size 64 --algorithm static \
  --metrics "127.0.0.1:$metrics_port"
measure "$scratch/image.json" --model noop --rate 100 --binary
image_server=$(server_time success 0.001)
image_processing=$(server_time success 0.001 processing)
image_peak_mib=$(peak_mib)
stop
json16=$(field "$scratch/json16.json" "d['latency_ms']['p99']")
image=$(field "$scratch/image.json" "d['latency_ms']['p99']")
echo "| p99 at 100/s, end to end: 16-float JSON / 1x3x224x224 FP32 binary | $(printf '%.2f' "$json16") / $(printf '%.2f' "$image") ms: the image adds $(python3 -c "print(f'{$image - $json16:.2f}')") ms | \`gpucap load --rate 100\`, \`--binary\` (noop, \`--noop-shape 3,224,224\`) |"
echo "| in the server (first byte to answer), 16-float JSON | $json16_server | gpucap_serve_request_duration_seconds{outcome=\"success\"} |"
echo "| in the server (first byte to answer), 1x3x224x224 FP32 binary | $image_server | the same |"
echo "| the server's own work (end of the body to answer), 16-float JSON | $json16_processing | gpucap_serve_request_processing_seconds{outcome=\"success\"} |"
echo "| the server's own work (end of the body to answer), 1x3x224x224 FP32 binary | $image_processing | the same |"

serve --gpu p40 --model nasnet_a_large --power-cap 90 --slo-ms 2000 --metrics "127.0.0.1:$metrics_port"
measure "$scratch/shed.json" --model nasnet_a_large --rate 150 --binary --slo-ms 2000 --connections 256
shed_server=$(server_time shed 0.005)
shed_peak_mib=$(peak_mib)
stop
echo "| 429s under 5x overload (twin P40, NASNet-A Large, 90 W), end to end: count, p99 / max latency of a 429 | $(field "$scratch/shed.json" "d['rejected_429']"), $(field "$scratch/shed.json" "round(d['rejection_latency_ms']['p99'],2)") / $(field "$scratch/shed.json" "round(d['rejection_latency_ms']['max'],2)") ms (goodput $(field "$scratch/shed.json" "round(d['goodput_rps'],1)")/s of $(field "$scratch/shed.json" "round(d['throughput_rps'],1)")/s answered) | \`gpucap load --rate 150 --binary\` |"
echo "| 429s in the server (first byte to answer) | $shed_server | gpucap_serve_request_duration_seconds{outcome=\"shed\"} |"
echo "| the server's peak memory (VmHWM): under 5x overload of NASNet's 1.3-MB images / at 100/s of 600-kB images | $shed_peak_mib / $image_peak_mib MiB | /proc/PID/status at the run's end |"
