"""Which machine native code was built for, and whether this one runs it: an artifact or an LLM
package built with `-mcpu=native` (or for a named CPU) uses instructions an older CPU lacks, and
its first call there dies of SIGILL; `check` refuses it at load with a ValueError instead.
MLIR-free (a loaded artifact's import path)."""
from __future__ import annotations

import platform

# Instruction-set flags (/proc/cpuinfo) that code built for a CPU may use.
ISA_PREFIXES = ("sse", "ssse", "avx", "fma", "f16c", "bmi", "amx", "popcnt", "abm", "movbe", "adx", "sha_ni",
                "vaes", "vpclmulqdq", "gfni", "aes", "pclmul", "asimd", "sve", "neon", "fp16", "bf16")

# The x86-64 micro-architecture levels (LLVM -mcpu names) as /proc/cpuinfo flags.
_V2 = ["sse", "sse2", "ssse3", "sse4_1", "sse4_2", "popcnt"]
_V3 = _V2 + ["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe"]
X86_LEVELS = {"x86-64": ["sse", "sse2"], "x86-64-v2": _V2, "x86-64-v3": _V3,
              "x86-64-v4": _V3 + ["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"]}


def isa_features() -> list[str]:
    """This machine's instruction-set flags (empty where /proc/cpuinfo is absent)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return sorted(x for x in value.split() if x.startswith(ISA_PREFIXES))
    except OSError:
        pass
    return []


def this_machine() -> dict:
    return {"system": platform.system(), "machine": platform.machine(), "isa": isa_features()}


def built_for(cpu: str | None, host_cpu: str | None = None) -> dict:
    """The record of a build for LLVM CPU `cpu` ("native": this machine; None: the baseline of
    the architecture; an x86-64 level; another name). `isa` is the flags the code may use, None
    where that is not known (a named CPU other than this one: `host_cpu`, LLVM's name for it)."""
    here = this_machine()
    if cpu == "native" or (cpu is not None and cpu == host_cpu):
        isa = here["isa"]
    elif cpu is None:
        isa = X86_LEVELS["x86-64"] if here["machine"] in ("x86_64", "AMD64") else []
    else:
        isa = X86_LEVELS.get(cpu)
    return {"system": here["system"], "machine": here["machine"], "cpu": cpu or "baseline", "isa": isa}


def check(where: str, built: dict, how: str) -> None:
    """ValueError when the code `built` records cannot run here (`how`: what to do instead)."""
    if not isinstance(built, dict):
        raise ValueError(f"{where}: does not say which machine it was built for")
    here = this_machine()
    for key in ("system", "machine"):
        if built.get(key) != here[key]:
            raise ValueError(f"{where}: built for {key} {built.get(key)!r}; this machine is {here[key]!r}")
    isa = built.get("isa", [])
    if isa is None:
        raise ValueError(f"{where}: built for CPU {built.get('cpu')!r}, whose instruction set this machine cannot "
                         f"check (running it could die of SIGILL): {how}")
    missing = sorted(set(isa) - set(here["isa"])) if here["isa"] else []
    if missing:
        raise ValueError(f"{where}: built for a CPU with {', '.join(missing)}, which this CPU lacks: {how}")
