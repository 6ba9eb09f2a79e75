#!/usr/bin/env python3
"""Deterministic mutation fuzzing of every input format a user hands the tools.

Each run mutates a valid seed (a safetensors file, a config.json, a cache archive, MLIR) and
runs the tool that reads it. Every run must end by itself within the timeout with exit code
0, 1 or 2, and a failing run must say why (non-empty output). A signal (a crash), a hang or
another exit code fails the test; the offending input is kept under the work directory and
named in the report.

  fuzz_inputs.py --tools BUILD/bin --work DIR [--runs-per-format N] [--seed S]
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys

TIMEOUT_S = 60

# Tokens that have broken parsers before: deep nesting, huge and special numbers, stray quotes.
NASTY = [
    b"[" * 100000, b"[" * 100000 + b"]" * 100000, b"{\"a\":" * 20000 + b"1" + b"}" * 20000,
    b"tensor<" * 50000, b"tensor<" * 50000 + b"f32" + b">" * 50000, b"(" * 50000 + b")" * 50000,
    b"[" * 50000 + b"1" + b"]" * 50000,
    b"18446744073709551615", b"-9223372036854775808", b"1e999", b"-1", b"NaN", b"null", b"\"",
    b"\\u0000", b"\x00", b"\xff\xfe", b"}", b"]", b",", b"0x", b"99999999999999999999999",
]


def mutate(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(8)
        pos = rng.randrange(len(data) + 1)
        if kind == 0 and data:  # flip bits
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
        elif kind in (1, 7):  # insert a nasty token (twice as likely as the rest)
            data[pos:pos] = rng.choice(NASTY)
        elif kind == 2 and data:  # delete a range
            del data[pos:pos + rng.randint(1, 64)]
        elif kind == 3 and data:  # duplicate a range
            end = min(len(data), pos + rng.randint(1, 256))
            data[pos:pos] = data[pos:end]
        elif kind == 4:  # truncate
            del data[pos:]
        elif kind == 5:  # replace a digit run with a huge or negative number
            digits = [i for i, b in enumerate(data) if 48 <= b <= 57]
            if digits:
                i = rng.choice(digits)
                data[i:i + 1] = rng.choice([b"18446744073709551615", b"-1", b"4611686018427387903", b"0"])
        elif kind == 6:  # random bytes
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
    return bytes(data)


def safetensors_bytes(tensors):
    header, blob = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + blob


class Runner:
    def __init__(self, tools, work):
        self.tools, self.work = tools, work
        self.runs, self.failures = 0, []

    def run(self, fmt, index, files, argv, env=None):
        """Runs argv (files already written); records a failure and keeps the input."""
        self.runs += 1
        e = dict(os.environ)
        e.update(env or {})
        try:
            p = subprocess.run(argv, capture_output=True, timeout=TIMEOUT_S, env=e)
            rc, out = p.returncode, p.stdout + p.stderr
            bad = None
            if rc < 0:
                bad = f"killed by signal {-rc}"
            elif rc not in (0, 1, 2):
                bad = f"exit code {rc}"
            elif rc != 0 and not out.strip():
                bad = f"exit code {rc} without a message"
        except subprocess.TimeoutExpired:
            bad, out = f"no exit within {TIMEOUT_S} s", b""
        if bad:
            keep = os.path.join(self.work, "failures", f"{fmt}-{index}")
            os.makedirs(keep, exist_ok=True)
            for f in files:
                if os.path.isfile(f):
                    shutil.copy(f, keep)
            self.failures.append(f"{fmt} #{index}: {bad}: {' '.join(argv)} (input kept in {keep})\n"
                                 f"    {out[-300:].decode(errors='replace')}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs-per-format", type=int, default=80)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--mlir-seeds", required=True, help="folder of valid .mlir files")
    ap.add_argument("--release-config", required=True)
    a = ap.parse_args()
    jit, opt = os.path.join(a.tools, "deepinfer-jit"), os.path.join(a.tools, "deepinfer-opt")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    rng = random.Random(a.seed)
    r = Runner(a.tools, a.work)
    cache = os.path.join(a.work, "cache")
    env = {"DEEPINFER_JIT_CACHE_DIR": cache}

    # Seeds.
    tiny = os.path.join(a.work, "tiny")
    subprocess.run([jit, "make-model", "--preset", "tiny", "--out", tiny, "--quiet"], check=True,
                   capture_output=True)
    configs = [open(os.path.join(tiny, "config.json"), "rb").read(), open(a.release_config, "rb").read()]
    topk_inputs = safetensors_bytes({
        "scores": ("F32", [4, 64], struct.pack("<256f", *[float((i * 37) % 101) for i in range(256)])),
        "lens": ("I32", [4], struct.pack("<4i", 64, 10, 0, 64)),
    })
    subprocess.run([jit, "compile", "--op", "kv_quant_insert", "--target", "sm_80", "--defaults-only", "--quiet"],
                   check=True, capture_output=True, env=dict(os.environ, **env))
    archive_path = os.path.join(a.work, "seed.dia")
    subprocess.run([jit, "cache", "export", archive_path], check=True, capture_output=True,
                   env=dict(os.environ, **env))
    archive = open(archive_path, "rb").read()
    mlir = [open(os.path.join(a.mlir_seeds, f), "rb").read()
            for f in sorted(os.listdir(a.mlir_seeds)) if f.endswith(".mlir") and "invalid" not in f]
    assert mlir, "no MLIR seeds"

    n = a.runs_per_format
    for i in range(n):  # safetensors headers (and their length prefix) through run-op
        data = bytearray(topk_inputs)
        if rng.random() < 0.25:
            data[0:8] = struct.pack("<Q", rng.choice([0, 7, 2**63, 2**64 - 1, len(data) * 4, rng.randrange(2**32)]))
        else:
            hdr_len = struct.unpack("<Q", bytes(data[:8]))[0]
            header = mutate(bytes(data[8:8 + hdr_len]), rng)
            data = bytearray(struct.pack("<Q", len(header)) + header + bytes(data[8 + hdr_len:]))
        f = os.path.join(a.work, "in.safetensors")
        open(f, "wb").write(bytes(data))
        r.run("safetensors", i, [f], [jit, "run-op", "--op", "topk", "--backend", "reference", "--attr", "k=8",
                                      "--in", f, "--out", os.path.join(a.work, "out.safetensors")], env)
    for i in range(n):  # config.json through tune --plan and a CPU model load
        f = os.path.join(a.work, "config.json")
        open(f, "wb").write(mutate(rng.choice(configs), rng))
        r.run("config", i, [f], [jit, "tune", "--plan", "--target", "sm_80", "--op", "topk", "--config", f], env)
    for i in range(n // 4):
        model = os.path.join(a.work, "tiny-mutated")
        shutil.rmtree(model, ignore_errors=True)
        shutil.copytree(tiny, model)
        open(os.path.join(model, "config.json"), "wb").write(mutate(configs[0], rng))
        r.run("model-config", i, [os.path.join(model, "config.json")],
              [jit, "run", "--model", model, "--backend", "cpu", "--prompt-ids", "1,2,3", "--max-new-tokens", "2",
               "--threads", "2"], env)
    for i in range(n):  # cache archives through import
        f = os.path.join(a.work, "archive.dia")
        open(f, "wb").write(mutate(archive, rng))
        dst = os.path.join(a.work, "import-dst")
        shutil.rmtree(dst, ignore_errors=True)
        r.run("archive", i, [f], [jit, "cache", "import", f, "--dir", dst], env)
    for i in range(n):  # MLIR through the verifier and both passes
        f = os.path.join(a.work, "op.mlir")
        open(f, "wb").write(mutate(rng.choice(mlir), rng))
        r.run("mlir", i, [f], [opt, f, "--di-specialize-target=target=sm_80", "--di-emit-cuda"], env)

    print(f"fuzz: {r.runs} runs over safetensors headers, config.json, cache archives and MLIR; "
          f"{len(r.failures)} failures")
    for f in r.failures:
        print("FAIL", f)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
