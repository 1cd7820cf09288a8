"""`relax-opt`: the mlir-opt of relax-mlir. Relax (Python) passes and upstream passes in one pipeline.

    relax-opt in.mlir --pass-pipeline='builtin.module(relax-infer-shapes,canonicalize)' -o out.mlir
    relax-opt in.mlir --relax-infer-shapes --relax-legalize
    relax-opt in.mlir --split-input-file --verify-diagnostics
    relax-opt in.mlir --relax-legalize --relax-print=script     # short Python-like output
"""
from __future__ import annotations

import io
import re
import subprocess
import sys
from dataclasses import dataclass, field

from mlir import ir

from relax_mlir.core.diagnostics import Diag, decode_source, suggest
from relax_mlir.core.pipeline import Instrumentation, run_pipeline, upstream_pass_names
from relax_mlir.core.session import (BYTECODE_MAGIC, Session, load_irdl, parse_bytecode, parse_module,
                                     stock_mlir_opt)
from relax_mlir.dialect.spec import OPS
from relax_mlir.passes import PipelineError, option_docs, parse_pipeline

__all__ = ["Session", "decode_source", "main", "parse_module", "run_pipeline"]

VERSION = "0.1.0"
SPLIT_MARKER = re.compile(r"^// -----\s*$", re.M)


def split_input(text: str) -> list[tuple[str, int]]:
    """The '// -----' chunks of a file (as mlir-opt's --split-input-file), each with the number of
    lines before it."""
    chunks, pos, line = [], 0, 0
    for m in SPLIT_MARKER.finditer(text):
        chunk = text[pos:m.start()]
        chunks.append((chunk, line))
        line += chunk.count("\n") + 1
        pos = m.end() + 1
    chunks.append((text[pos:], line))
    return chunks


# --- --verify-diagnostics ----------------------------------------------------------------------

_EXPECT_RE = re.compile(r"//\s*expected-(error|warning|note|remark)\s*(@([+-]\d+|above|below))?\s*\{\{(.*?)\}\}")


@dataclass
class Expect:
    line: int
    severity: str
    text: str
    seen: bool = False


def collect_expectations(text: str, line_offset: int) -> list[Expect]:
    out = []
    lines = text.split("\n")
    for i, l in enumerate(lines):
        for m in _EXPECT_RE.finditer(l):
            lineno = i + 1 + line_offset
            where = m.group(3)
            if where is None:
                target = lineno
            elif where == "above":
                target = lineno - 1
            elif where == "below":
                target = lineno + 1
            else:
                target = lineno + int(where)
            out.append(Expect(target, m.group(1), m.group(4)))
    return out


def _flatten(diags: list[Diag]) -> list[Diag]:
    out = []
    for d in diags:
        out.append(d)
        out.extend(_flatten(d.notes))
    return out


def verify_diagnostics(diags: list[Diag], expects: list[Expect], file: str) -> list[str]:
    """Match diagnostics to expectations; the list of failures (empty = success)."""
    errors = []
    for d in _flatten(diags):
        if d.severity == "note" and d.message.startswith("see current operation"):
            continue
        for e in expects:
            if not e.seen and e.line == d.line and e.severity == d.severity and e.text in d.message:
                e.seen = True
                break
        else:
            errors.append(f"{file}:{d.line}:{d.col}: error: unexpected {d.severity}: {d.message}")
    for e in expects:
        if not e.seen:
            errors.append(f"{file}:{e.line}: error: expected {e.severity} \"{e.text}\" was not produced")
    return errors


# --- main --------------------------------------------------------------------------------------


HELP = """usage: relax-opt [options] [input-file]

Options take one or two dashes, as in mlir-opt (-split-input-file, --split-input-file).

  -o FILE                       write the output to FILE (default: stdout)
  --pass-pipeline=PIPELINE      'builtin.module(relax-infer-shapes,canonicalize,...)': relax passes,
                                named pipelines and upstream passes in one textual pipeline
  --<relax-pass>[=opts]         run one relax pass (--relax-infer-shapes, --relax-legalize=ops=relax.add)
  --<named-pipeline>            run a named pipeline (--relax-optimize, --relax-compile-cpu, ...)
  --<upstream-pass>             any other flag that names an upstream pass runs it (--canonicalize)
  --split-input-file            process each '// -----' chunk separately
  --verify-diagnostics          check '// expected-error @+1 {{...}}' annotations
  --mlir-print-ir-before-all    print the IR before each pass (stderr)
  --mlir-print-ir-after-all     print the IR after each pass (stderr)
  --mlir-print-ir-after-change  print the IR after each pass that changed it (stderr)
  --mlir-print-ir-after-failure print the IR after a pass fails (stderr)
  --mlir-disable-threading      run the pass manager single-threaded
  --mlir-print-op-generic       print in the generic form
  --relax-print=FORM            the output form: mlir (default) or script (short Python-like text,
                                one line per op; relax_mlir.core.script.to_script)
  --mlir-print-debuginfo        print locations
  --mlir-timing                 report pass timings (stderr)
  --mlir-pass-statistics        report the upstream passes' statistics (stderr)
  --mlir-pass-statistics-display=list|pipeline
                                statistics merged per pass (list) or per pipeline position (default)
  --dump-pass-pipeline          print the pass manager's pipeline before running it (stderr)
  --emit-bytecode               write MLIR bytecode instead of text (inputs may be bytecode too)
  --irdl-file=FILE              load the dialects defined in the IRDL file FILE before parsing
  --mlir-print-ir-tree-dir=DIR  write the IR after each pass under DIR, one file per pass
  --mlir-elide-elementsattrs-if-larger=N
                                print elements attributes of more than N elements as their type
  --mlir-elide-resource-strings-if-larger=N
                                likewise for resource blobs of more than N bytes
  --mlir-print-local-scope      print types and attributes in place of their aliases
  --mlir-pretty-debuginfo       print locations in the short form (with --mlir-print-debuginfo)
  --mlir-print-assume-verified  print without verifying first
  --show-dialects               list the loaded dialects
  --allow-unregistered-dialect  accept ops of dialects that are not loaded
  --no-verify                   do not verify after each pass (--verify-each=false, as mlir-opt)
  --list-passes                 list the relax passes with their options, and the named pipelines
  --version                     print the version
"""

_FLAGS = ("split-input-file", "verify-diagnostics", "mlir-print-ir-before-all", "mlir-print-ir-after-all",
          "mlir-print-ir-after-change", "mlir-print-ir-after-failure", "mlir-print-ir-module-scope",
          "mlir-disable-threading", "mlir-print-op-generic", "mlir-print-debuginfo", "mlir-timing", "list-passes",
          "version", "help", "no-verify", "allow-unregistered-dialect", "emit-bytecode", "dump-pass-pipeline",
          "mlir-pass-statistics", "mlir-print-local-scope", "mlir-pretty-debuginfo", "mlir-print-assume-verified",
          "show-dialects")
# Options that take a value: name -> the accepted values (None: any, such as a file name).
_VALUED = {"irdl-file": None, "mlir-pass-statistics-display": ("list", "pipeline"), "mlir-print-ir-tree-dir": None,
           "mlir-elide-elementsattrs-if-larger": int, "mlir-elide-resource-strings-if-larger": int}


class UsageError(Exception):
    """A bad command line: one line on stderr, exit code 1."""


PRINT_FORMS = ("mlir", "script")


@dataclass
class Args:
    flags: set
    items: list
    in_path: str = "-"
    out_path: str = "-"
    print_form: str = "mlir"
    irdl_file: str | None = None
    statistics_display: str = "pipeline"
    values: dict = field(default_factory=dict)  # the other valued options, by name


def parse_args(argv: list[str], registry) -> Args:
    """mlir-opt's command line: options with one or two dashes, `-o FILE`, `--pass-pipeline=P`,
    one flag per pass or named pipeline (`--relax-legalize=ops=relax.add`)."""
    args = Args(set(), [])
    inputs: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        i += 1
        if a == "-" or not a.startswith("-"):
            inputs.append(a)
            continue
        if a in ("-h", "--help", "-help"):
            args.flags.add("help")
            continue
        name, eq, value = a.lstrip("-").partition("=")
        if name == "o":
            if not eq:
                if i >= len(argv):
                    raise UsageError("-o needs a file name")
                value = argv[i]
                i += 1
            args.out_path = value
        elif name == "pass-pipeline":
            if not eq:
                if i >= len(argv):
                    raise UsageError("--pass-pipeline needs a pipeline")
                value = argv[i]
                i += 1
            if not value.strip():
                raise UsageError("--pass-pipeline is empty")
            args.items.extend(parse_pipeline(value))
        elif name == "relax-print":
            if not eq:
                if i >= len(argv) or argv[i].startswith("-"):
                    raise UsageError(f"--relax-print needs a value ({', '.join(PRINT_FORMS)})")
                value = argv[i]
                i += 1
            if value not in PRINT_FORMS:
                raise UsageError(f"unknown value '{value}' for --relax-print{suggest(value, PRINT_FORMS)}; "
                                 f"choices: {', '.join(PRINT_FORMS)}")
            args.print_form = value
        elif name in _VALUED:
            if not eq:
                if i >= len(argv) or argv[i].startswith("-"):
                    raise UsageError(f"--{name} needs a value")
                value = argv[i]
                i += 1
            choices = _VALUED[name]
            if choices is int:
                if not value.isdigit():
                    raise UsageError(f"--{name} takes a number of elements >= 0 (got '{value}')")
                args.values[name] = int(value)
            elif choices is not None and value not in choices:
                raise UsageError(f"unknown value '{value}' for --{name}{suggest(value, choices)}; "
                                 f"choices: {', '.join(choices)}")
            elif name == "irdl-file":
                args.irdl_file = value
            elif name == "mlir-pass-statistics-display":
                args.statistics_display = value
            else:
                args.values[name] = value
        elif name == "verify-each":  # mlir-opt's spelling: on by default, =false turns it off
            if eq and value not in ("true", "1", "false", "0"):
                raise UsageError(f"option '--verify-each' takes true or false (got '{value}')")
            if value in ("false", "0"):
                args.flags.add("no-verify")
        elif name in _FLAGS:
            if eq and value not in ("true", "1"):
                if value in ("false", "0"):
                    continue
                raise UsageError(f"option '--{name}' takes no value (got '{value}')")
            args.flags.add(name)
        elif name in registry.passes or name in registry.pipelines:
            args.items.append(name + ("{" + value + "}" if eq else ""))
        elif name.startswith("mlir-") or not name:
            raise UsageError(f"unknown option '{a}'{suggest('--' + name, ['--' + f for f in _FLAGS])}; see --help")
        else:
            upstream = upstream_pass_names()
            if upstream and name not in upstream:
                hint = suggest("--" + name, ["--" + n for n in list(_FLAGS) + registry.names() + upstream])
                raise UsageError(f"unknown option or pass '{a}'{hint}; "
                                 f"see --help and --list-passes")
            args.items.append(name + ("{" + value + "}" if eq else ""))
    if len(inputs) > 1:
        raise UsageError(f"more than one input file: {', '.join(inputs)}")
    if inputs:
        args.in_path = inputs[0]
    if "emit-bytecode" in args.flags:
        if "split-input-file" in args.flags:
            raise UsageError("--emit-bytecode cannot be combined with --split-input-file (one module per output)")
        if args.print_form != "mlir":
            raise UsageError("--emit-bytecode cannot be combined with --relax-print=script")
    return args


def _wrap(text: str, indent: int, width: int = 100) -> str:
    import textwrap

    return textwrap.fill(" ".join(text.split()), width=width, initial_indent=" " * indent,
                         subsequent_indent=" " * indent)


def list_passes(registry) -> str:
    """Every relax pass with its full description and options, then the named pipelines."""
    import dataclasses

    out = ["Relax passes:"]
    for name in sorted(registry.passes):
        cls = registry.passes[name]
        out.append(f"  --{name}")
        doc = (cls.__doc__ or "").strip()
        if doc:
            out.append(_wrap(doc, 6))
        docs = option_docs(cls)
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else "(computed)"
            if isinstance(default, bool):
                default = str(default).lower()
            ty = f.type if isinstance(f.type, str) else f.type.__name__
            line = f"      {f.name}={ty} (default {default!s})"
            out.append(line + (f": {docs[f.name]}" if f.name in docs else ""))
    out.append("")
    out.append("Named pipelines:")
    for name in sorted(registry.pipelines):
        items, doc = registry.pipelines[name]
        out.append(f"  --{name}")
        out.append(_wrap(doc, 6))
        out.append(_wrap("= " + ",".join(items), 6))
    out.append("")
    out.append("Any upstream MLIR pass may be named in the same pipeline (mlir-opt --help lists them).")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _err(msg: str) -> int:
    print(f"relax-opt: error: {msg}", file=sys.stderr)
    return 1


def _main(argv: list[str]) -> int:
    from relax_mlir.targets import registry as full_registry

    registry = full_registry()
    try:
        args = parse_args(argv, registry)
    except UsageError as e:
        return _err(str(e))
    flags = args.flags
    if "help" in flags:
        print(HELP)
        return 0
    if "version" in flags:
        import mlir
        print(f"relax-opt {VERSION} (relax-mlir), MLIR Python bindings from {list(mlir.__path__)[0]}")
        return 0
    if "list-passes" in flags:
        sys.stdout.write(list_passes(registry))
        return 0
    if "show-dialects" in flags:
        print("Available Dialects: " + ",".join(_dialects()))
        return 0

    # The pipeline is checked (names, options, op names in options) before the input is read.
    try:
        items = registry.expand(args.items)
        for item in items:
            name = item.split("{", 1)[0].strip()
            if name in registry.passes and "{" in item:
                from relax_mlir.passes import parse_options

                parse_options(registry.passes[name], item[item.index("{") + 1:item.rindex("}")])
    except PipelineError as e:
        return _err(str(e))

    in_path = args.in_path
    source_name = "<stdin>" if in_path == "-" else in_path
    try:
        if in_path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(in_path, "rb") as f:
                data = f.read()
    except OSError as e:
        return _err(f"cannot read '{in_path}': {e.strerror or e}")
    irdl_text = None
    if args.irdl_file is not None:
        try:
            with open(args.irdl_file, "rb") as f:
                irdl_text, bad = decode_source(f.read(), args.irdl_file)
        except OSError as e:
            return _err(f"cannot read '{args.irdl_file}': {e.strerror or e}")
        if bad is None:
            probe = Session(source_name)  # its errors once, not once per input chunk
            if not load_irdl(probe, irdl_text, args.irdl_file):
                bad = probe.diags
        if bad is not None:
            for d in bad if isinstance(bad, list) else [bad]:
                print(d.render(), file=sys.stderr)
            return 1
    bytecode = data.startswith(BYTECODE_MAGIC)
    if bytecode:
        for flag in ("split-input-file", "verify-diagnostics"):
            if flag in flags:
                return _err(f"--{flag} needs a text input; '{source_name}' is MLIR bytecode")
        text = ""
    else:
        text, bad = decode_source(data, source_name)
        if bad is not None:
            print(bad.render(), file=sys.stderr)
            return 1
    emit_bytecode = "emit-bytecode" in flags
    out = None
    if args.out_path != "-":
        try:  # open the output first: an unwritable path fails before any work
            out = open(args.out_path, "wb") if emit_bytecode else open(args.out_path, "w", encoding="utf-8")
        except OSError as e:
            return _err(f"cannot write '{args.out_path}': {e.strerror or e}")

    chunks = split_input(text) if "split-input-file" in flags else [(text, 0)]

    inst = Instrumentation(print_before_all="mlir-print-ir-before-all" in flags,
                           print_after_all="mlir-print-ir-after-all" in flags,
                           print_after_change="mlir-print-ir-after-change" in flags,
                           print_after_failure="mlir-print-ir-after-failure" in flags,
                           timing="mlir-timing" in flags,
                           disable_threading="mlir-disable-threading" in flags,
                           dump_pipeline="dump-pass-pipeline" in flags,
                           dump_dir=args.values.get("mlir-print-ir-tree-dir"),
                           statistics=args.statistics_display if "mlir-pass-statistics" in flags else None)
    outputs: list[str] = []
    failed = False
    verify = "verify-diagnostics" in flags
    all_errors: list[str] = []
    for chunk, line_offset in chunks:
        session = Session(source_name)
        padded = "\n" * line_offset + chunk  # keep original line numbers in locations
        if irdl_text is not None:
            load_irdl(session, irdl_text, args.irdl_file)  # checked above
        module = parse_bytecode(session, data, irdl_text) if bytecode else parse_module(session, padded)
        if module is not None and "allow-unregistered-dialect" not in flags and _unregistered_ops(session, module):
            module = None
        ok = module is not None and run_pipeline(session, module, args.items, registry, instrument=inst,
                                                 verify_each="no-verify" not in flags)
        if verify:
            errs = verify_diagnostics(session.diags, collect_expectations(chunk, line_offset), source_name)
            all_errors.extend(errs)
            if ok and module is not None:
                outputs.append(_print(module, flags, session, args.print_form, args.values))
            continue
        for d in session.diags:
            print(d.render(), file=sys.stderr)
        if not ok:
            failed = True
            continue
        outputs.append(_bytecode(module, session) if emit_bytecode else
                       _print(module, flags, session, args.print_form, args.values))

    if verify:
        for e in all_errors:
            print(e, file=sys.stderr)
        failed = bool(all_errors)
    if any(o is None for o in outputs):
        return 1
    if emit_bytecode:
        result, stream = b"".join(outputs), out or sys.stdout.buffer
    else:
        result = ("\n# -----\n" if args.print_form == "script" else "\n// -----\n").join(outputs)
        stream = out or sys.stdout
    try:
        if not failed or "split-input-file" in flags:
            stream.write(result)
        if out is not None:
            out.close()
    except OSError as e:
        return _err(f"cannot write '{args.out_path}': {e.strerror or e}")
    return 1 if failed else 0


def _dialects() -> list[str]:
    """The upstream dialects (stock mlir-opt's --show-dialects, from the same MLIR build as the
    bindings) and relax's."""
    names = {"relax", "relax_v"}
    try:
        out = subprocess.run([stock_mlir_opt(), "--show-dialects"], capture_output=True, text=True, timeout=30).stdout
        listed = out.split(":", 1)[1] if ":" in out else ""
        names.update(n.strip() for n in listed.replace("\n", ",").split(",") if n.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return sorted(names)


def _unregistered_ops(session: Session, module) -> bool:
    """Record a located error for each op of a dialect that is neither loaded nor relax's (as
    mlir-opt refuses them unless --allow-unregistered-dialect); True if there was one."""
    found = []

    def visit(o):
        if o.name not in OPS and not session.ctx.is_registered_operation(o.name):
            found.append(o)
        return ir.WalkResult.ADVANCE

    with session.ctx:
        module.walk(visit)
        for o in found:  # the session's handler records each as a located diagnostic
            o.location.emit_error(f"unregistered operation '{o.name}' (its dialect is not loaded; "
                                  f"--allow-unregistered-dialect accepts it)")
    return bool(found)


def _bytecode(module, session: Session) -> bytes:
    buf = io.BytesIO()
    with session.ctx:
        module.write_bytecode(buf)
    return buf.getvalue()


def _print(module, flags, session: Session, form: str = "mlir", values: dict | None = None) -> str | None:
    """The module in the chosen output form; None (after a one-line error) if it cannot be printed."""
    with session.ctx:
        if form == "script":
            from relax_mlir.core.script import to_script

            try:
                return to_script(module)
            except Exception as e:  # a view must never end in a traceback
                _err(f"cannot print the script form: {type(e).__name__}: {e}")
                return None
        values = values or {}
        return module.get_asm(print_generic_op_form="mlir-print-op-generic" in flags,
                              enable_debug_info="mlir-print-debuginfo" in flags,
                              pretty_debug_info="mlir-pretty-debuginfo" in flags,
                              use_local_scope="mlir-print-local-scope" in flags,
                              # (with --no-verify the IR may be invalid, which the printer would
                              # then crash on: it is verified before printing)
                              assume_verified="mlir-print-assume-verified" in flags and "no-verify" not in flags,
                              large_elements_limit=values.get("mlir-elide-elementsattrs-if-larger"),
                              large_resource_limit=values.get("mlir-elide-resource-strings-if-larger"))


if __name__ == "__main__":
    sys.exit(main())
