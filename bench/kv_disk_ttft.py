#!/usr/bin/env python3
"""TTFT of a long shared prefix: cold, RAM hit, and disk hit after a kill -9 restart, with the
KV disk tier (--kv-disk); then prefill/decode throughput with the tier on vs off (alternating
server runs). Prints numbers; asserts nothing but greedy token identity (reported).

usage: kv_disk_ttft.py EDGELM_BIN MODEL.gguf [--threads 2] [--prefix 2000] [--serve-arg=--flag --serve-arg=value]

Hybrid models (qwen35) restore a recurrent-state snapshot with the blocks: the line per prompt
shows the tier's snapshot counters after the restart.
"""
import argparse, http.client, json, os, random, shutil, signal, statistics, subprocess, sys, tempfile, time


SERVE_ARGS = []


def start(binary, model, threads, disk, extra=()):
    args = [binary, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", "-t", str(threads),
            "--kv-memory", "512M", "--startup-profile", "off", "--admin-token", "bench"]
    if disk:
        args += ["--kv-disk", disk]
    args += list(extra) + SERVE_ARGS
    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    port = None
    t0 = time.time()
    for line in p.stderr:
        if "listening on http://127.0.0.1:" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0].strip("()"))
        if " ready" in line and port:
            break
    load_s = time.time() - t0
    # keep draining stderr so the server never blocks on it
    import threading
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    return p, port, load_s


def completion(port, tokens, max_tokens):
    """(ttft_s, total_s, completion token texts) over SSE."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"prompt": tokens, "max_tokens": max_tokens, "temperature": 0, "stream": True})
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    ttft = None
    pieces = []
    while True:
        line = r.readline()
        if not line:
            break
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        d = json.loads(line[6:])
        ch = d.get("choices") or [{}]
        txt = ch[0].get("text", "")
        if txt and ttft is None:
            ttft = time.perf_counter() - t0
        if txt:
            pieces.append(txt)
    total = time.perf_counter() - t0
    return (ttft if ttft is not None else total), total, "".join(pieces)


def health(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/health")
    return json.loads(c.getresponse().read())


def wait_writes(port, settle=1.0):
    last, since = -1, time.time()
    while True:
        w = health(port).get("kv_disk", {}).get("writes", 0)
        if w != last:
            last, since = w, time.time()
        elif time.time() - since > settle:
            return w
        time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefix", type=int, default=2000)
    ap.add_argument("--new", type=int, default=16)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--serve-arg", action="append", default=[], help="an extra `edgelm serve` argument (repeatable)")
    ap.add_argument("--warmup", action="store_true",
                    help="after each restart, one short unrelated request before the disk hit (so the disk hit "
                         "does not pay the restarted process's first touch of the weights)")
    a = ap.parse_args()
    SERVE_ARGS.extend(a.serve_arg)
    rng = random.Random(7)
    disk = tempfile.mkdtemp(prefix="kvdisk-bench-")
    print(f"load average at start: {os.getloadavg()}")
    prompts = [[rng.randrange(100, 32000) for _ in range(a.prefix)] for _ in range(a.reps)]

    cold, ram, dsk, same = [], [], [], True
    for i, prompt in enumerate(prompts):
        p, port, load_s = start(a.binary, a.model, a.threads, disk)
        t_c, _, out_c = completion(port, prompt, a.new)
        t_r, _, out_r = completion(port, prompt, a.new)
        cold.append(t_c)
        ram.append(t_r)
        writes = wait_writes(port)
        os.kill(p.pid, signal.SIGKILL)  # a power cut
        p.wait()
        p, port, load_s = start(a.binary, a.model, a.threads, disk)
        if a.warmup:
            completion(port, [rng.randrange(100, 32000) for _ in range(32)], 1)
        t_d, _, out_d = completion(port, prompt, a.new)
        h = health(port)["kv_disk"]
        dsk.append(t_d)
        same = same and out_c == out_r == out_d
        print(f"prompt {i}: cold {t_c*1e3:.0f} ms, RAM hit {t_r*1e3:.0f} ms, disk hit after kill -9 restart "
              f"{t_d*1e3:.0f} ms (restart load {load_s:.1f} s; {writes} blocks written; after restart: "
              f"prefix blocks {h['prefix_blocks']}, read avg {h['read_ms_avg']:.2f} ms/block"
              f"{', snapshots ' + json.dumps(h['snapshots']) if 'snapshots' in h else ''}); "
              f"greedy {a.new} tokens identical: {out_c == out_r == out_d}")
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    mc, mr, md = statistics.median(cold), statistics.median(ram), statistics.median(dsk)
    print(f"median TTFT ({a.prefix}-token prefix, {a.threads} threads, warm-up after restart: {a.warmup}): cold {mc*1e3:.0f} ms, RAM hit {mr*1e3:.0f} ms, "
          f"disk hit {md*1e3:.0f} ms; disk/cold {md/mc:.3f}, disk/RAM {md/mr:.2f}; outputs identical: {same}")

    # Throughput with the tier on vs off, alternating server runs: fresh 512-token prompts
    # (prefill tok/s = 512 / TTFT) then 64 greedy tokens (decode tok/s).
    rates = {"off": [], "on": []}
    for rnd in range(0 if a.skip_throughput else 2):
        for mode in ("off", "on"):
            d = tempfile.mkdtemp(prefix="kvdisk-tp-") if mode == "on" else ""
            p, port, _ = start(a.binary, a.model, a.threads, d)
            pr = [rng.randrange(100, 32000) for _ in range(512)]
            ttft, total, _ = completion(port, pr, 64)
            rates[mode].append((512 / ttft, 63 / (total - ttft)))
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            if d:
                shutil.rmtree(d, ignore_errors=True)
    for mode in ("off", "on") if rates["on"] else ():
        pf = statistics.median(r[0] for r in rates[mode])
        dc = statistics.median(r[1] for r in rates[mode])
        print(f"tier {mode}: prefill {pf:.1f} tok/s, decode {dc:.2f} tok/s  (runs: {rates[mode]})")
    print(f"load average at end: {os.getloadavg()}")
    shutil.rmtree(disk, ignore_errors=True)


if __name__ == "__main__":
    main()
