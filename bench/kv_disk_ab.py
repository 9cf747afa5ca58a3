#!/usr/bin/env python3
"""Disk hit vs RAM hit after a kill -9 restart, two edgelm binaries alternating (A/B), so that a
change to the KV disk tier's read path can be measured on a machine whose load drifts.

usage: kv_disk_ab.py MODEL.gguf BIN_A BIN_B [--rounds 5] [--prefix 2000] [--threads 2]

One 2,000-token prefix is computed once by BIN_A and persisted (--kv-disk, a temp dir); then each
round, for each binary: start it on that directory, one 32-token unrelated warm-up request, the
prefix (a disk hit: TTFT), the prefix again (a RAM hit: TTFT), kill -9. Prints each round and the
medians, with the tier's own prefix read wall time (edge_kv_disk_fetch_seconds_total) and the sum
of its per-block read times (edge_kv_disk_read_seconds_total; above the wall time when the reader
threads overlap). Greedy outputs of the two hits must be equal (reported).
"""
import argparse, http.client, os, random, re, shutil, signal, statistics, tempfile

import kv_disk_ttft as B


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    return sum(float(v) for v in re.findall(r"^" + name + r"(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("bin_a")
    ap.add_argument("bin_b")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prefix", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    rng = random.Random(7)
    prompt = [rng.randrange(100, 32000) for _ in range(a.prefix)]
    disk = tempfile.mkdtemp(prefix="kvdisk-ab-")
    print(f"load average at start: {os.getloadavg()}")
    p, port, _ = B.start(a.bin_a, a.model, a.threads, disk)
    B.completion(port, prompt, 4)
    B.wait_writes(port)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    bins = {"A": a.bin_a, "B": a.bin_b}
    res = {k: {"disk": [], "ram": [], "fetch": [], "read": []} for k in bins}
    for r in range(a.rounds):
        for name, binary in bins.items():
            p, port, _ = B.start(binary, a.model, a.threads, disk)
            B.completion(port, [rng.randrange(100, 32000) for _ in range(32)], 1)
            t_d, _, out_d = B.completion(port, prompt, 4)
            fetch = metric(port, "edge_kv_disk_fetch_seconds_total")
            read = metric(port, "edge_kv_disk_read_seconds_total")
            t_r, _, out_r = B.completion(port, prompt, 4)
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            R = res[name]
            R["disk"].append(t_d)
            R["ram"].append(t_r)
            R["fetch"].append(fetch)
            R["read"].append(read)
            print(f"round {r} {name}: disk hit {t_d*1e3:.0f} ms (prefix read wall {fetch*1e3:.1f} ms, block reads "
                  f"{read*1e3:.1f} ms), RAM hit {t_r*1e3:.0f} ms, outputs equal: {out_d == out_r}", flush=True)
    for name, R in res.items():
        md, mr = statistics.median(R["disk"]), statistics.median(R["ram"])
        print(f"{name} ({bins[name]}): median disk hit {md*1e3:.0f} ms, RAM hit {mr*1e3:.0f} ms, disk/RAM {md/mr:.2f}, "
              f"read wall {statistics.median(R['fetch'])*1e3:.1f} ms, block reads {statistics.median(R['read'])*1e3:.1f} ms")
    print(f"load average at end: {os.getloadavg()}")
    shutil.rmtree(disk, ignore_errors=True)


if __name__ == "__main__":
    main()
