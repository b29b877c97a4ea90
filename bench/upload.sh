#!/usr/bin/env bash
# Memory for file uploads: 25 MB transcription uploads through sluice to `sluice mock`, one at a
# time and CONCURRENT at once; reports sluice's RSS before, its peak (VmHWM) and the growth per
# upload in flight, and checks the mock got each file byte for byte (its transcript names the
# upload's size and FNV-1a hash). A benchmark, not a timed test: figures go to docs/endpoints.md.
#
#   bash bench/upload.sh                 # 25 MB, 1 then 4 at once
#   SIZE_MB=25 CONCURRENT=8 bash bench/upload.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE_MB=${SIZE_MB:-25}
CONCURRENT=${CONCURRENT:-4}
SLUICE=${SLUICE:-target/release/sluice}
[ -x "$SLUICE" ] || cargo build --release --locked --bin sluice >&2
PY=${PY:-python3}

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_file() { for _ in $(seq 1 300); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

"$SLUICE" mock --port 0 --ready-file "$work/mock.addr" >"$work/mock.log" 2>&1 &
pids+=($!)
wait_file "$work/mock.addr"
cat >"$work/config.yaml" <<YAML
model_list:
  - model_name: whisper-1
    litellm_params: {model: openai/whisper-1, api_base: "http://$(cat "$work/mock.addr")/v1", api_key: sk-mock}
YAML
SLUICE_LOG=warn "$SLUICE" serve --config "$work/config.yaml" --port 0 --workers 1 \
  --ready-file "$work/gw.addr" --data-dir "$work/data" >"$work/gw.log" 2>&1 &
gw_pid=$!
pids+=($gw_pid)
wait_file "$work/gw.addr"

"$PY" - "$(cat "$work/gw.addr")" "$gw_pid" "$SIZE_MB" "$CONCURRENT" <<'PY'
import concurrent.futures, http.client, json, sys

addr, pid, size_mb, at_once = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
host, port = addr.rsplit(":", 1)

def status(field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # MB
    raise KeyError(field)

audio = bytes(range(256)) * (size_mb * 1024 * 1024 // 256)
def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h
want = f"[{len(audio)} bytes fnv1a {fnv1a(audio):016x}]"
boundary = "sluice-upload-bench"
head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
        "Content-Type: audio/wav\r\n\r\n").encode()
tail = f"\r\n--{boundary}--\r\n".encode()
body = head + audio + tail

def upload(_):
    c = http.client.HTTPConnection(host, int(port), timeout=120)
    c.putrequest("POST", "/v1/audio/transcriptions")
    c.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    c.putheader("Content-Length", str(len(body)))
    c.endheaders()
    for i in range(0, len(body), 64 * 1024):  # arrives in many frames, as from a network
        c.send(body[i:i + 64 * 1024])
    r = c.getresponse()
    text = json.loads(r.read())["text"]
    assert r.status == 200 and text.endswith(want), (r.status, text[-80:])

rest = status("VmRSS")
upload(0)
one = status("VmHWM")
with concurrent.futures.ThreadPoolExecutor(at_once) as pool:
    list(pool.map(upload, range(at_once)))
many = status("VmHWM")
print(f"upload {size_mb} MB: RSS at rest {rest:.1f} MB; peak after one upload {one:.1f} MB "
      f"(+{one - rest:.1f}); peak after {at_once} at once {many:.1f} MB "
      f"(+{(many - rest) / at_once:.1f} MB per upload in flight); every file arrived byte for byte")
PY
