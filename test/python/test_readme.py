"""The README's code blocks run: Python blocks execute, `$ command` lines of console blocks run in
a shell (a `$ cat FILE` line writes the text under it to FILE), all in one scratch directory, in
README order. A block preceded by `<!-- illustrative: why -->` is skipped."""
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import relax_mlir

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```(\w*)\s*$")
ILLUSTRATIVE = re.compile(r"^<!--\s*illustrative\b.*-->\s*$")
MOST_ILLUSTRATIVE = 2  # keep the untested blocks few


@dataclass
class Block:
    lang: str
    line: int  # 1-based line of the opening fence
    text: str
    illustrative: bool


def blocks(text: str) -> list[Block]:
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        out.append(Block(m.group(1), start + 1, "\n".join(lines[start + 1:j]) + "\n", bool(ILLUSTRATIVE.match(prev))))
        i = j + 1
    return out


def console_steps(text: str) -> list[tuple[str, str]]:
    """(command, the text shown under it) for each `$ ` line."""
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return [(c, "\n".join(o) + "\n" if o else "") for c, o in steps]


def run_console(block: Block, cwd: Path) -> None:
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    for cmd, shown in console_steps(block.text):
        m = re.fullmatch(r"cat (\S+)", cmd.strip())
        if m:
            (cwd / m.group(1)).write_text(shown)
            continue
        r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and "Traceback" not in r.stderr, \
            f"README.md:{block.line}: `{cmd}` failed ({r.returncode}):\n{r.stderr[-3000:]}"
        for want in shown.splitlines():
            assert want.strip() in r.stdout, f"README.md:{block.line}: `{cmd}` did not print {want!r}"


def run_python(block: Block, cwd: Path) -> None:
    code = compile(block.text, f"README.md:{block.line}", "exec")
    exec(code, {"__name__": "__readme__"})


def test_readme_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # relax_mlir.from_jax is being fixed (issue 15: `from_jax = None` shadows the lazy attribute);
    # the README is written for the final API. Until the fix lands, run the blocks with it patched
    # in and report the test as xfail (every block still has to run).
    pending = relax_mlir.__dict__.get("from_jax", ...) is None
    if pending:
        from relax_mlir.frontend.jax import from_jax

        monkeypatch.setattr(relax_mlir, "from_jax", from_jax)
    ran = 0
    for b in blocks(README.read_text()):
        if b.illustrative:
            continue
        if b.lang == "python":
            run_python(b, tmp_path)
        elif b.lang == "console":
            run_console(b, tmp_path)
        else:
            pytest.fail(f"README.md:{b.line}: a code block needs a language (python or console) or an "
                        f"<!-- illustrative: ... --> marker")
        ran += 1
    assert ran >= 5
    if pending:
        pytest.xfail("relax_mlir.from_jax is None after `import relax_mlir` (issue 15)")


def test_readme_has_few_illustrative_blocks():
    bs = blocks(README.read_text())
    assert sum(b.illustrative for b in bs) <= MOST_ILLUSTRATIVE
    assert any(b.lang == "python" and "from relax_mlir import builder" in b.text for b in bs)


def test_block_extraction():
    text = "a\n<!-- illustrative: x -->\n```console\n$ cat f\nhello\n$ ls\n```\n```python\nx = 1\n```\n"
    b = blocks(text)
    assert [(x.lang, x.line, x.illustrative) for x in b] == [("console", 3, True), ("python", 8, False)]
    assert console_steps(b[0].text) == [("cat f", "hello\n"), ("ls", "")]
