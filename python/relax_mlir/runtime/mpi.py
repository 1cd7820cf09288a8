"""Running an SPMD plan (relax_mlir.spmd) on MPI ranks: compiled segments, collectives through MPI.

`SpmdProgram(exe, plan, comm)` holds one rank's view: `prog(*local_shards)` runs the plan on this
rank's shards and returns its local results; `prog.run_global(*full_arrays)` scatters full
arrays (every rank passes the same ones), runs, and gathers the full results on every rank.

Collectives run on numpy buffers through mpi4py (PyPI `mpich`: the MPICH ABI, `libmpi.so.12`):
all_reduce -> MPI_Allreduce, all_gather -> MPI_Allgather, reduce_scatter ->
MPI_Reduce_scatter_block, all_to_all -> MPI_Alltoall, collective_broadcast -> MPI_Bcast,
collective_permute -> MPI_Sendrecv pairs. A process group is a communicator split from `comm`
(cached per group list). The group's ranks and block order follow StableHLO: rank i of a group
is the i-th id listed, block i of a gather/scatter belongs to it.

Failure on one rank never hangs the others: before the first step the ranks check that their
local argument shapes agree (one small all-reduce of a digest; a sharded program runs the same
shapes everywhere; on a mismatch the shapes are exchanged for the message), and after
each compiled segment the ranks agree on success (one small allgather) before the next
collective; a failure anywhere raises ValueError on every rank, naming the rank and its error.
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np

from relax_mlir.runtime import load as load_artifact

__all__ = ["SpmdProgram", "SpmdError", "available", "load", "PLAN_FILE"]

PLAN_FILE = "spmd_plan.json"


def _contiguous(x: np.ndarray) -> np.ndarray:
    """C-contiguous, keeping rank 0 (np.ascontiguousarray makes a scalar 1-D)."""
    return x if x.flags.c_contiguous else x.copy(order="C")


def _min_send(op: str, attrs: dict, nbytes: int, rank: int) -> float:
    """The fewest bytes one rank must send for a collective on an `nbytes` operand (p ranks a
    group): all_reduce 2(p-1)/p N (reduce-scatter then all-gather), all_gather (p-1) N,
    reduce_scatter and all_to_all (p-1)/p N, broadcast N from the root only, permute N per target."""
    p = attrs.get("group_size", 1)
    if op == "all_reduce":
        return 2 * (p - 1) / p * nbytes
    if op == "all_gather":
        return (p - 1) * nbytes
    if op in ("reduce_scatter", "all_to_all"):
        return (p - 1) / p * nbytes
    if op == "collective_broadcast":
        groups = attrs["groups"]
        return float(nbytes) if rank in groups[0::p] else 0.0
    if op == "collective_permute":
        pairs = attrs["pairs"]
        return float(nbytes) * sum(1 for s, t in zip(pairs[0::2], pairs[1::2]) if s == rank and t != rank)
    return 0.0


class SpmdError(ValueError):
    """A rank failed (bad input or a run-time check); raised on every rank."""


def available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN", "and": "LAND", "or": "LOR"}


class SpmdProgram:
    def __init__(self, exe, plan: dict, comm=None):
        from mpi4py import MPI

        self.MPI = MPI
        self.exe = exe
        self.plan = plan
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.size = 1
        for n in plan["mesh_shape"]:
            self.size *= n
        if self.comm.Get_size() != self.size:
            raise SpmdError(f"the program's mesh {dict(zip(plan['mesh_axes'], plan['mesh_shape']))} has {self.size} "
                            f"devices but the communicator has {self.comm.Get_size()} ranks "
                            f"(run it with mpiexec -n {self.size})")
        self.rank = self.comm.Get_rank()
        self._groups: dict[tuple, Any] = {}
        self.bytes_sent = 0  # payload bytes this rank handed to collectives (per process)
        # bytes this rank must send at the least (bandwidth-optimal algorithms), summed
        self.min_bytes_sent = 0.0

    def export(self, path: str, cpu: str | None = "native") -> None:
        """Write the artifact (the compiled segments, runtime/loader.py) and the plan beside it:
        `load(path)` on every rank runs it without MLIR in the process."""
        import json
        import os

        if self.exe is None:
            os.makedirs(path, exist_ok=True)
        else:
            self.exe.export(path, cpu)
        with open(os.path.join(path, PLAN_FILE), "w", encoding="utf-8") as f:
            json.dump({"format": "relax-mlir-spmd-1", "compiled": self.exe is not None, **self.plan}, f)

    # --- mesh geometry ---------------------------------------------------------------------
    def coords(self, rank: int) -> dict[str, int]:
        """The mesh coordinates of `rank` (device id = rank, row-major over the mesh axes)."""
        out = {}
        for a, n in reversed(list(zip(self.plan["mesh_axes"], self.plan["mesh_shape"]))):
            out[a] = rank % n
            rank //= n
        return out

    def _block(self, axes: list[str], rank: int) -> tuple[int, int]:
        """(block index, block count) of `rank` along a dim split over `axes` (major first)."""
        c = self.coords(rank)
        idx, count = 0, 1
        for a in axes:
            n = dict(zip(self.plan["mesh_axes"], self.plan["mesh_shape"]))[a]
            idx, count = idx * n + c[a], count * n
        return idx, count

    # --- calls -----------------------------------------------------------------------------
    def __call__(self, *local: Any):
        return self.run_local(*local)

    def run_local(self, *local: Any):
        """Run on this rank's local shards; returns this rank's local results (a tuple if several)."""
        arrays, sig, error = None, None, None
        try:
            arrays = [np.asarray(a) for a in local]
            sig = [(a.shape, str(a.dtype)) for a in arrays]
        except Exception as e:  # still take part in the exchange, or the other ranks wait forever
            error = f"{type(e).__name__}: {e}"
        # one small all-reduce in the common case: the max of (digest, -digest, failed) tells
        # whether every rank has the same signature and none failed; only then are they exchanged
        digest = int.from_bytes(hashlib.blake2b(repr(sig).encode(), digest_size=7).digest(), "little") \
            if error is None else 0
        probe = np.array([digest, -digest, int(error is not None)], np.int64)
        self.comm.Allreduce(self.MPI.IN_PLACE, probe, op=self.MPI.MAX)
        if probe[0] == -probe[1] and not probe[2]:
            return self._run(arrays)
        seen = self.comm.allgather((error, sig))
        bad = [(r, e) for r, (e, _) in enumerate(seen) if e is not None]
        if bad:
            raise SpmdError("; ".join(f"rank {r}: {e}" for r, e in bad))
        if any(s != seen[0][1] for _, s in seen):
            raise SpmdError("the ranks passed local arguments of different shapes or dtypes: "
                            + "; ".join(f"rank {r}: {s}" for r, (_, s) in enumerate(seen)))
        return self._run(arrays)

    def run_global(self, *full: Any):
        """Scatter full arrays by the argument shardings, run, gather the full results (every rank
        passes the same arrays and gets the same results)."""
        local, error = None, None
        try:
            local = self._scatter(full)
        except Exception as e:  # every rank learns of it before any collective
            error = str(e) if isinstance(e, SpmdError) else f"{type(e).__name__}: {e}"
        self._agree(error)
        outs = self.run_local(*local)
        single = not isinstance(outs, tuple)
        outs = (outs,) if single else outs
        full_outs = tuple(self._gather(o, sh) for o, sh in zip(outs, self.plan["result_shardings"]))
        return full_outs[0] if single else full_outs

    def _scatter(self, full) -> list[np.ndarray]:
        """This rank's blocks of the full arrays; SpmdError for a wrong count, rank or an indivisible dim."""
        arrays = [np.asarray(a) for a in full]
        plan = self.plan
        if len(arrays) != plan["n_args"]:
            raise SpmdError(f"the program takes {plan['n_args']} arguments, got {len(arrays)}")
        names = plan.get("global_names") or [[]] * len(arrays)
        local = []
        for i, (a, sh) in enumerate(zip(arrays, plan["arg_shardings"])):
            if a.ndim != len(sh):
                raise SpmdError(f"argument #{i} has rank {a.ndim}, expected {len(sh)}")
            index = []
            for j, axes in enumerate(sh):
                if not axes:
                    index.append(slice(None))
                    continue
                b, n = self._block(axes, self.rank)
                d = a.shape[j]
                if d % n:
                    nm = names[i][j] if i < len(names) and j < len(names[i] or []) and names[i][j] else str(d)
                    raise SpmdError(f"argument #{i} dim {j} ({nm}) is {d}, which the sharding over mesh axes "
                                    f"{axes} splits {n} ways: not divisible by {n}")
                m = d // n
                index.append(slice(b * m, (b + 1) * m))
            local.append(_contiguous(a[tuple(index)]))
        return local

    def _gather(self, x: np.ndarray, sh: list[list[str]]) -> np.ndarray:
        if not any(sh):
            return x
        parts = self.comm.allgather(x)
        out = None
        # place each rank's block: build the full array from block indices
        full_shape = list(x.shape)
        for j, axes in enumerate(sh):
            if axes:
                full_shape[j] *= self._block(axes, 0)[1]
        out = np.empty(full_shape, x.dtype)
        for r, p in enumerate(parts):
            index = []
            for j, axes in enumerate(sh):
                if not axes:
                    index.append(slice(None))
                else:
                    b, _ = self._block(axes, r)
                    index.append(slice(b * x.shape[j], (b + 1) * x.shape[j]))
            out[tuple(index)] = p
        return out

    # --- the plan --------------------------------------------------------------------------
    def _agree(self, error: str | None):
        """Every rank learns whether any rank failed (one small integer all-reduce); raise on all of
        them, with every rank's message, if one did."""
        flag = np.array([0 if error is None else 1], np.int32)
        self.comm.Allreduce(self.MPI.IN_PLACE, flag, op=self.MPI.MAX)
        if not flag[0]:
            return
        errors = self.comm.allgather(error)
        bad = [(r, e) for r, e in enumerate(errors) if e is not None]
        if bad:
            raise SpmdError("; ".join(f"rank {r}: {e}" for r, e in bad))

    def _run(self, args: list[np.ndarray]):
        plan = self.plan
        env: dict[str, np.ndarray] = {f"a{i}": a for i, a in enumerate(args)}
        for step in plan["steps"]:
            if step["kind"] == "segment":
                error = None
                try:
                    fn = self.exe[step["function"]]
                    outs = fn(*args, *[env[v] for v in step["in"]])
                    if not isinstance(outs, (tuple, list)):
                        outs = (outs,)
                    for v, o in zip(step["out"], outs):
                        env[v] = np.asarray(o)
                except Exception as e:  # every rank must learn of it, or the others hang in the next collective
                    error = f"{type(e).__name__}: {e}"
                self._agree(error)
            else:
                env[step["out"][0]] = self.collective(step["op"], step["attrs"], env[step["in"][0]])
        res = [env[v] for v in plan["results"]]
        for r in plan.get("results_replicated", ()):  # computed whole: keep this rank's block
            res[r] = self._my_block(res[r], plan["result_shardings"][r])
        res = tuple(res)
        return res[0] if len(res) == 1 else res

    def _my_block(self, x: np.ndarray, sh) -> np.ndarray:
        index = []
        for j, axes in enumerate(sh):
            if not axes:
                index.append(slice(None))
                continue
            b, n = self._block(axes, self.rank)
            m = x.shape[j] // n
            index.append(slice(b * m, (b + 1) * m))
        return _contiguous(x[tuple(index)])

    # --- collectives -----------------------------------------------------------------------
    def group_comm(self, groups: Sequence[int], n: int):
        key = (tuple(groups), n)
        c = self._groups.get(key)
        if c is None:
            rows = [list(groups[i:i + n]) for i in range(0, len(groups), n)]
            color = next(g for g, row in enumerate(rows) if self.rank in row)
            c = self.comm.Split(color, rows[color].index(self.rank))
            self._groups[key] = c
        return c

    def _mpi_op(self, red: str):
        return getattr(self.MPI, _OPS[red])

    def collective(self, op: str, attrs: dict, x: np.ndarray) -> np.ndarray:
        x = _contiguous(x)
        if x.dtype not in (np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                           np.uint32, np.uint64, np.bool_, np.float16):
            raise SpmdError(f"collective {op} on {x.dtype} is not supported by the MPI runtime")
        if x.dtype == np.float16 and op in ("all_reduce", "reduce_scatter"):
            # MPI has no half-precision reductions: reduce in f32 and round once (exact for 2 ranks)
            return self.collective(op, attrs, x.astype(np.float32)).astype(np.float16)
        self.bytes_sent += x.nbytes
        self.min_bytes_sent += _min_send(op, attrs, x.nbytes, self.rank)
        if op == "collective_permute":
            return self._permute(attrs["pairs"], x)
        comm = self.group_comm(attrs["groups"], attrs["group_size"])
        n = attrs["group_size"]
        if op == "all_reduce":
            out = np.empty_like(x)
            comm.Allreduce(x, out, op=self._mpi_op(attrs["reduce"]))
            return out
        if op == "collective_broadcast":
            out = x.copy()
            comm.Bcast(out, root=0)
            return out
        if op == "all_gather":
            d = attrs["dim"]
            buf = np.empty((n,) + x.shape, x.dtype)
            comm.Allgather(x, buf)
            return np.concatenate(list(buf), axis=d)
        if op == "reduce_scatter":
            d = attrs["dim"]
            send = _contiguous(np.stack(np.split(x, n, axis=d)))
            out = np.empty(send.shape[1:], x.dtype)
            comm.Reduce_scatter_block(send, out, op=self._mpi_op(attrs["reduce"]))
            return out
        if op == "all_to_all":
            s, c = attrs["split_dim"], attrs["concat_dim"]
            send = _contiguous(np.stack(np.split(x, n, axis=s)))
            recv = np.empty_like(send)
            comm.Alltoall(send, recv)
            return np.concatenate(list(recv), axis=c)
        raise SpmdError(f"unknown collective {op}")

    def _permute(self, pairs: list[int], x: np.ndarray) -> np.ndarray:
        out = np.zeros_like(x)
        reqs = []
        for src, dst in zip(pairs[0::2], pairs[1::2]):
            if src == self.rank and dst == self.rank:
                out[...] = x
            elif src == self.rank:
                reqs.append(self.comm.Isend(x, dest=dst, tag=7))
            elif dst == self.rank:
                reqs.append(self.comm.Irecv(out, source=src, tag=7))
        self.MPI.Request.Waitall(reqs)
        return out


def load(path: str, comm=None) -> SpmdProgram:
    """The SPMD program of an artifact written by `SpmdProgram.export` (the same on every rank)."""
    import json
    import os

    with open(os.path.join(path, PLAN_FILE), encoding="utf-8") as f:
        plan = json.load(f)
    if not isinstance(plan, dict) or plan.get("format") != "relax-mlir-spmd-1":
        raise ValueError(f"{path}: {PLAN_FILE} is not a relax-mlir SPMD plan")
    exe = load_artifact(path) if plan.pop("compiled") else None
    return SpmdProgram(exe, plan, comm)
