"""The committed IRDL file is current; the pass registry is consistent and every pass is tested."""
import pathlib

from relax_mlir.dialect.irdl_emit import irdl_text
from relax_mlir.transforms import PASSES

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_irdl_file_is_current():
    committed = (ROOT / "dialects" / "relax.irdl.mlir").read_text()
    assert committed == irdl_text(), "dialects/relax.irdl.mlir is stale: run `make irdl`"


def test_registry_names():
    for name, cls in PASSES.items():
        assert cls.name == name
        assert (cls.__doc__ or "").strip(), f"{name} has no docstring"


def test_core_passes_have_lit_tests():
    for name in ("relax-infer-shapes", "relax-legalize", "relax-lower-shapes", "relax-to-upstream"):
        assert (ROOT / "test" / "transforms" / f"{name}.mlir").exists(), name
