#!/usr/bin/env bash
# A throwaway one-member etcd on this machine, for trying `gpucap cluster` (README, "Share one
# power budget across nodes"): Debian's etcd-server (scripts/setup.sh installs it), a data folder
# in /tmp removed at exit, clients on ADDRESS (default 127.0.0.1:2379), peers on a free loopback
# port. Runs until Ctrl-C or SIGTERM. A real cluster runs three or five members on three or five
# machines (docs/cluster.md).
set -euo pipefail
address=${1:-127.0.0.1:2379}
if [[ ! $address =~ ^[0-9a-zA-Z.-]+:[0-9]+$ ]]; then
  echo "local-etcd: error: '$address' must be HOST:PORT" >&2
  exit 2
fi
command -v etcd >/dev/null || { echo "local-etcd: error: etcd is not installed (scripts/setup.sh installs etcd-server)" >&2; exit 3; }
peer_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
data=$(mktemp -d /tmp/gpucap-etcd.XXXXXX)
etcd --name local --data-dir "$data/member" \
  --listen-client-urls "http://$address" --advertise-client-urls "http://$address" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "local=http://127.0.0.1:$peer_port" --log-level error --logger zap > "$data/etcd.log" 2>&1 &
pid=$!
stop() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$data"
}
trap 'stop; exit 0' INT TERM
trap stop EXIT
for _ in $(seq 100); do
  if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "http://$address/health" 2>/dev/null; then
    echo "local-etcd: etcd at http://$address (data in $data); stop with Ctrl-C or SIGTERM"
    wait "$pid"
    echo "local-etcd: error: etcd stopped: $(tail -n 3 "$data/etcd.log")" >&2
    exit 1
  fi
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.1
done
echo "local-etcd: error: etcd did not start on $address: $(tail -n 3 "$data/etcd.log")" >&2
exit 1
