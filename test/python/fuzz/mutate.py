"""The malformed-IR fuzzer's two halves: seeded mutations of IR text, and a batch driver.

Mutations (`mutate(data, rng)`) work on bytes and apply one to three edits: delete, duplicate or
swap lines; flip a character; set a number to 0, -1, 2^62 or a huge value; change an element type,
a dim or an attribute value; drop a `}`, a `)`, a `]` or a quote; insert bytes that are not UTF-8;
truncate.

The driver runs many inputs in one process through the same entry points as the command-line
tools (`relax_opt.main`, `import_stablehlo.main`), each on a file written to disk, with file
descriptors 1 and 2 redirected, and reports one JSON line per input. A parent (`run_jobs`) splits
the jobs over worker processes and restarts a worker after a signal or a hang, so the input that
killed it is known and the rest still run:

    python test/python/fuzz/mutate.py JOBS.jsonl RESULTS.jsonl
"""
from __future__ import annotations

import base64
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

# --- mutations -------------------------------------------------------------------------------

DTYPES = [b"f32", b"f16", b"bf16", b"f64", b"i1", b"i8", b"i16", b"i32", b"i64", b"ui64", b"i4", b"f8E4M3FN",
          b"index", b"complex<f32>", b"x"]
NUMBERS = [b"0", b"-1", b"1", b"2", b"4611686018427387904", b"9223372036854775807", b"-9223372036854775808",
           b"99999999999999999999999", b"2147483648", b"1.5", b"-0", b"1e308", b"65536"]
ATTR_VALUES = [b'"x"', b"[1.5]", b"[]", b"[[1]]", b'["n"]', b'["?"]', b"[-1]", b"[0, 0]", b"true", b"1.5",
               b"f32", b"@nowhere", b"unit", b"{}", b"[4611686018427387904]", b"dense<1> : tensor<i32>",
               b'["n + "]', b'["2*n"]', b"[1, 2, 3, 4, 5, 6, 7, 8, 9]", b"-1", b"0"]
DIMS = [b'"?"', b"0", b"-1", b"1", b'"n"', b'"m"', b'"n + 1"', b'"2*n"', b'"n*"', b'""', b"4611686018427387904",
        b'"zz"', b"1.5"]
JUNK = [b"\xff", b"\xfe\xff", b"\xc3", b"\x80\x80", b"\x00", b"\xed\xa0\x80", b"\xe2\x82", b"\x1b", b"\r"]

_NUM_RE = re.compile(rb"-?\d+(?:\.\d+)?")
_DTYPE_RE = re.compile(rb"\b(?:f16|bf16|f32|f64|i1|i8|i16|i32|i64|index)\b")
_ATTR_RE = re.compile(rb"(\b[a-z_]+ = )([^,}]+)")
_DIM_RE = re.compile(rb'(?<=[\[,] )(?:"[^"]*"|-?\d+)|(?<=\[)(?:"[^"]*"|-?\d+)')


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def delete_line(d, rng):
    ls = _lines(d)
    del ls[rng.randrange(len(ls))]
    return b"\n".join(ls)


def duplicate_line(d, rng):
    ls = _lines(d)
    i = rng.randrange(len(ls))
    ls.insert(rng.randrange(len(ls) + 1), ls[i])
    return b"\n".join(ls)


def swap_lines(d, rng):
    ls = _lines(d)
    i, j = rng.randrange(len(ls)), rng.randrange(len(ls))
    ls[i], ls[j] = ls[j], ls[i]
    return b"\n".join(ls)


def flip_char(d, rng):
    if not d:
        return d
    i = rng.randrange(len(d))
    c = rng.choice(b"(){}[]<>\"%@:,=-0123456789x!#^ \n" + bytes([d[i] ^ (1 << rng.randrange(7))]))
    return d[:i] + bytes([c]) + d[i + 1:]


def _sub_match(d, rng, regex, choices):
    ms = list(regex.finditer(d))
    if not ms:
        return flip_char(d, rng)
    m = rng.choice(ms)
    return d[:m.start()] + rng.choice(choices) + d[m.end():]


def change_number(d, rng):
    return _sub_match(d, rng, _NUM_RE, NUMBERS)


def change_dtype(d, rng):
    return _sub_match(d, rng, _DTYPE_RE, DTYPES)


def change_dim(d, rng):
    return _sub_match(d, rng, _DIM_RE, DIMS)


def change_attr(d, rng):
    ms = list(_ATTR_RE.finditer(d))
    if not ms:
        return change_number(d, rng)
    m = rng.choice(ms)
    return d[:m.start(2)] + rng.choice(ATTR_VALUES) + d[m.end(2):]


def drop_closer(d, rng):
    idx = [i for i, c in enumerate(d) if c in b'})]>"']
    if not idx:
        return truncate(d, rng)
    i = rng.choice(idx)
    return d[:i] + d[i + 1:]


def insert_junk(d, rng):
    i = rng.randrange(len(d) + 1)
    return d[:i] + rng.choice(JUNK) + d[i:]


def truncate(d, rng):
    return d[:rng.randrange(len(d) + 1)]


def drop_all_but_one_line(d, rng):
    ls = [l for l in _lines(d) if l.strip()]
    return rng.choice(ls) if ls else b""


MUTATORS = (delete_line, duplicate_line, swap_lines, flip_char, change_number, change_number, change_dtype,
            change_dtype, change_dim, change_dim, change_attr, change_attr, drop_closer, insert_junk, truncate,
            drop_all_but_one_line)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three seeded edits of `data` (a mutant can also be empty or not UTF-8)."""
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        data = rng.choice(MUTATORS)(data, rng)
    return data


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One to four seeded byte edits of a binary input (MLIR bytecode): bit flips, extreme bytes,
    insertions or a truncation; the 4-byte magic is kept so that the reader is reached."""
    b = bytearray(data)
    kind = rng.choice(("flip", "byte", "insert", "truncate"))
    for _ in range(rng.randint(1, 4)):
        p = rng.randrange(4, len(b)) if len(b) > 4 else len(b)
        if kind == "flip" and p < len(b):
            b[p] ^= 1 << rng.randrange(8)
        elif kind == "byte" and p < len(b):
            b[p] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif kind == "insert":
            b[p:p] = bytes([rng.randrange(256)])
        else:
            return bytes(b[:p])
    return bytes(b)


def split_chunks(text: str) -> list[str]:
    """A lit input's `// -----` chunks, RUN and CHECK lines dropped (they only make inputs longer)."""
    out = []
    for chunk in re.split(r"^// -----\s*$", text, flags=re.M):
        lines = [l for l in chunk.split("\n") if not re.match(r"\s*//\s*(RUN|[A-Z0-9_-]*CHECK[A-Z-]*|[A-Z]+):", l)]
        body = "\n".join(lines).strip("\n")
        if body.strip():
            out.append(body + "\n")
    return out


# --- the driver (child process) --------------------------------------------------------------

def _run_tool(tool: str, args: list[str]) -> int:
    if tool == "relax-opt":
        from relax_mlir.tools.relax_opt import main
    elif tool == "relax-import-stablehlo":
        from relax_mlir.tools.import_stablehlo import main
    else:
        raise ValueError(f"unknown tool {tool}")
    try:
        rc = main(args)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return rc


class _Hang(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


def drive(jobs_path: str, results_path: str, per_input_s: int = 20) -> None:
    """Run every job of `jobs_path` (JSON lines: id, tool, args, data (base64), name); append
    `{"start": id}` before and `{"id", "rc", "out"}` after each to `results_path`."""
    import signal
    import traceback

    signal.signal(signal.SIGALRM, _on_alarm)
    # The tools' imports (MLIR, jax's StableHLO parser) before the first input's alarm: on a
    # loaded machine they alone took over per_input_s, reported as a hang of the first input.
    import relax_mlir.frontend.stablehlo  # noqa: F401
    import relax_mlir.tools.import_stablehlo  # noqa: F401
    import relax_mlir.tools.relax_opt  # noqa: F401
    from jax._src.lib.mlir import ir  # noqa: F401  (what the importer parses StableHLO with)

    tmp = tempfile.mkdtemp(prefix="relax-fuzz-")
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved_out, saved_err = os.dup(1), os.dup(2)
    with open(jobs_path) as jf, open(results_path, "a", buffering=1) as rf:
        for line in jf:
            job = json.loads(line)
            path = os.path.join(tmp, job.get("name", "mutant.mlir"))
            with open(path, "wb") as f:
                f.write(base64.b64decode(job["data"]))
            rf.write(json.dumps({"start": job["id"]}) + "\n")
            rf.flush()
            err = tempfile.TemporaryFile()
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(devnull, 1)
            os.dup2(err.fileno(), 2)
            hang = False
            try:
                signal.alarm(per_input_s)
                rc = _run_tool(job["tool"], [a.replace("{input}", path) for a in job["args"]])
            except _Hang:
                hang, rc = True, None
            except BaseException:  # a traceback escaping the tool's main: the finding we look for
                traceback.print_exc()
                rc = "exception"
            finally:
                signal.alarm(0)
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved_out, 1)
                os.dup2(saved_err, 2)
            err.seek(0)
            out = err.read().decode("utf-8", "replace")
            err.close()
            rf.write(json.dumps({"id": job["id"], "rc": rc, "hang": hang, "out": out[-4000:], "path": path}) + "\n")
            rf.flush()


# --- the parent ------------------------------------------------------------------------------

@dataclass
class Job:
    id: int
    tool: str
    args: list[str]
    data: bytes
    name: str = "mutant.mlir"
    seed_name: str = ""


@dataclass
class Outcome:
    job: Job
    rc: object = None
    out: str = ""
    signal: int | None = None
    hang: bool = False
    path: str = ""
    findings: list[str] = field(default_factory=list)


_HERE = os.path.abspath(__file__)


def _worker(jobs: list[Job], workdir: str, timeout_s: float, env: dict) -> list[Outcome]:
    """Run `jobs` in driver processes, restarting after a crash or a hang."""
    outcomes: dict[int, Outcome] = {}
    pending = list(jobs)
    byid = {j.id: j for j in jobs}
    round_ = 0
    while pending:
        round_ += 1
        jp = os.path.join(workdir, f"jobs-{pending[0].id}-{round_}.jsonl")
        rp = os.path.join(workdir, f"results-{pending[0].id}-{round_}.jsonl")
        with open(jp, "w") as f:
            for j in pending:
                f.write(json.dumps({"id": j.id, "tool": j.tool, "args": j.args, "name": j.name,
                                    "data": base64.b64encode(j.data).decode()}) + "\n")
        open(rp, "w").close()
        proc = subprocess.Popen([sys.executable, _HERE, jp, rp], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        last_progress, last_size = time.monotonic(), 0
        killed = False
        while proc.poll() is None:
            time.sleep(0.2)
            size = os.path.getsize(rp)
            if size != last_size:
                last_size, last_progress = size, time.monotonic()
            elif time.monotonic() - last_progress > timeout_s:
                proc.kill()
                killed = True
        stderr = proc.stderr.read().decode("utf-8", "replace")
        proc.stderr.close()
        started = None
        with open(rp) as f:
            for line in f:
                if not line.endswith("\n"):
                    break
                r = json.loads(line)
                if "start" in r:
                    started = r["start"]
                    continue
                started = None
                outcomes[r["id"]] = Outcome(byid[r["id"]], r["rc"], r["out"], hang=r["hang"], path=r["path"])
        if started is not None:  # the input this process died on
            o = Outcome(byid[started], proc.returncode, stderr[-4000:])
            if killed:
                o.hang = True
            elif proc.returncode is not None and proc.returncode < 0:
                o.signal = -proc.returncode
            else:
                o.rc = proc.returncode
            outcomes[started] = o
        elif proc.returncode != 0 and not outcomes.keys() >= {j.id for j in pending}:
            raise RuntimeError(f"fuzz driver failed before its first input (rc {proc.returncode}):\n{stderr}")
        pending = [j for j in pending if j.id not in outcomes]
    return [outcomes[j.id] for j in jobs]


_LOCATED = r"^{f}:\d+:\d+: (error|warning|note|remark): "
_WHOLE_FILE = r"^{f}: (error|warning): "


def classify(o: Outcome) -> list[str]:
    """The pass criteria: no signal, no hang, no traceback, no internal error, every error located
    (file:line:col, with the real file name) or explicitly about the whole file."""
    found = []
    if o.signal is not None:
        found.append(f"signal {o.signal}")
    if o.hang:
        found.append("hang")
    if "Traceback (most recent call last)" in o.out or o.rc == "exception":
        found.append("traceback")
    if "internal error" in o.out:
        found.append("internal error")
    if o.signal is None and not o.hang and o.rc not in (0, 1, "exception"):
        found.append(f"exit code {o.rc}")
    if o.signal is None and not o.hang and o.rc == 1 and "error" not in o.out:
        found.append("failure without an error message")
    name = re.escape(o.job.name)
    f = rf"(?:\S*/)?{name}"
    if o.job.data.startswith(b"ML\xefR"):  # bytecode carries its own locations, file names included,
        f = r"\S+"  # which the mutation may have changed (mutant.ml\7Fr:3:8 is still a location)
    for line in o.out.splitlines():
        if re.search(r"\berror\b", line) and not line.startswith((" ", "\t", "Traceback")) \
                and not re.match(_LOCATED.format(f=f), line) and not re.match(_WHOLE_FILE.format(f=f), line):
            if re.match(r"^\S+:\d+:\d+: (error|warning|note): ", line) or re.match(r"^(error|\S+: error): ", line) \
                    or "error" in line.split(":", 1)[0]:
                found.append(f"unlocated: {line[:200]}")
                break
    o.findings = found
    return found


def run_jobs(jobs: list[Job], workers: int = 2, timeout_s: float = 60.0, env: dict | None = None,
             workdir: str | None = None) -> list[Outcome]:
    """Run all `jobs` over `workers` driver processes; each outcome carries its findings."""
    from concurrent.futures import ThreadPoolExecutor

    env = dict(os.environ if env is None else env)
    env.setdefault("PYTHONFAULTHANDLER", "")
    env.pop("PYTHONFAULTHANDLER", None)
    workdir = workdir or tempfile.mkdtemp(prefix="relax-fuzz-parent-")
    shards = [jobs[i::workers] for i in range(workers)]
    with ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(lambda s: _worker(s, workdir, timeout_s, env), [s for s in shards if s]))
    out = [o for r in results for o in r]
    out.sort(key=lambda o: o.job.id)
    for o in out:
        classify(o)
    return out


if __name__ == "__main__":
    drive(sys.argv[1], sys.argv[2], int(os.environ.get("RELAX_MLIR_FUZZ_INPUT_TIMEOUT", "20")))
