"""Writes the reference files a script generates or, with --check, compares them with the
committed ones: the scripts that pin tests to a Python package's output share this."""
import sys
from pathlib import Path


def write_or_check(files: dict[Path, str], source: str) -> int:
    """files: path -> text. source names what produced them (a package and its version)."""
    check = "--check" in sys.argv[1:]
    failed = False
    for path, text in files.items():
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"{path} differs from what {source} produces now; rerun {sys.argv[0]} and review the diff")
            failed = True
        else:
            print(f"{path}: matches {source}")
    return 1 if failed else 0
