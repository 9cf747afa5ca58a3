#!/usr/bin/env python3
"""Held-out check of a running edgelm server's latency predictions.

Sends N requests one at a time to each named model (pinned, with a budget too large to cap
them), of random prompt lengths and output lengths not used by any profile, and compares the
predicted_ms of each response's x-edgelm-route header with the measured wall time.

  python3 eval/route_predictions.py --url http://127.0.0.1:8080 --model small:200 --model large:48 -n 16
"""
import argparse
import json
import random
import statistics
import time
import urllib.request

WORDS = ("the little girl went to park and saw a big red ball she was happy played with her friend "
         "dog cat sun tree bird flew over house mom said time for lunch they ate apple").split()


def one(url, model, n_words, max_tokens, rng):
    prompt = " ".join(rng.choice(WORDS) for _ in range(n_words))
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "latency_budget_ms": 1e9, "cache": False}
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        route = r.headers["x-edgelm-route"]
        usage = json.load(r)["usage"]
    ms = (time.perf_counter() - t0) * 1e3
    predicted = float(route.split(";")[1])
    return usage["prompt_tokens"], usage["completion_tokens"], predicted, ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", action="append", required=True, help="NAME:MAX_OUTPUT")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--max-words", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    print("| model | requests | mean error | median error | worst error | mean abs error |")
    print("|---|---|---|---|---|---|")
    for spec in a.model:
        name, max_out = spec.split(":")
        errors, abs_ms = [], []
        for _ in range(a.n):
            n_in, n_out, pred, ms = one(a.url, name, rng.randint(3, a.max_words), rng.randint(1, int(max_out)), rng)
            errors.append(abs(pred - ms) / ms)
            abs_ms.append(abs(pred - ms))
            print(f"  {name}: in {n_in} out {n_out}: predicted {pred:.0f} ms, measured {ms:.0f} ms", flush=True)
        print(f"| {name} | {len(errors)} | {100 * statistics.mean(errors):.1f}% | "
              f"{100 * statistics.median(errors):.1f}% | {100 * max(errors):.1f}% | {statistics.mean(abs_ms):.0f} ms |",
              flush=True)


if __name__ == "__main__":
    main()
