"""The documents say what the code does: every option, subcommand and target they list
exists, every one that exists is listed, their counts are the code's, their links lead
somewhere, and the README stays a front page (at most 8 KB)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_xtc import cli
from tests import ROOT
from tests.support import readme

GUIDE = ROOT / "docs" / "user-guide.md"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             ROOT / "benchmarks" / "README.md"]


def table_rows(text: str, header: str) -> list[str]:
    """The first cells of the body of the table whose header row starts with ``header``."""
    table = text[text.index(header):].split("\n\n")[0]
    return re.findall(r"^\| (.+?) \|", table, re.M)[2:]


def test_readme_is_a_front_page() -> None:
    assert len((ROOT / "README.md").read_bytes()) <= 8 * 1024


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files(doc: Path) -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text())
    missing = [link for link in links if "://" not in link
               and not (doc.parent / link).exists()]
    assert not missing, f"{doc.relative_to(ROOT)} links to {missing}"


PROJECT_PATH = re.compile(r"\b(?:tests|benchmarks|pytest_xtc|devicecheck|examples)/"
                          r"[\w./-]*\.(?:py|yaml|md|sh)\b")


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_project_paths_named_in_the_text_exist(doc: Path) -> None:
    """A file named in the text (``tests/unit/core/workers/test_fence.py``), not linked:
    one moved or renamed since leaves the reader nowhere."""
    named = sorted(set(PROJECT_PATH.findall(doc.read_text())))
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, f"{doc.relative_to(ROOT)} names {missing}"


def test_every_option_is_in_the_guide_and_every_option_there_exists() -> None:
    shown = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    declared = set(re.findall(r"(--xtc-[a-z0-9-]+)", shown))
    text = GUIDE.read_text()
    table = " ".join(table_rows(text, "| option |"))
    listed = set(re.findall(r"(--xtc-[a-z0-9-]+)", table))
    assert declared - listed == set(), "options missing from docs/user-guide.md's table"
    assert listed - declared == set(), "docs/user-guide.md lists options pytest does not have"


def test_every_subcommand_is_in_the_guide() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    rows = table_rows(GUIDE.read_text(), "| subcommand |")
    listed = {row.strip("`").split()[1] for row in rows}
    assert listed == commands


def test_targets_table_names_the_registered_targets() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    registered = set(project["entry-points"]["pytest_xtc.targets"])
    rows = table_rows(GUIDE.read_text(), "| target | what |")
    listed = {name for row in rows for name in re.findall(r"`([\w-]+)`", row)}
    assert listed == registered


def test_selftest_sample_counts_the_variants() -> None:
    from pytest_xtc.selftest import faults

    text = (ROOT / "docs" / "robustness.md").read_text()
    said = re.search(r"selftest: (\d+) faulty host variants", text)
    assert said and int(said[1]) == len(faults.FAULTS)
    rejected = re.search(r"faulty variants rejected: (\d+) of (\d+)", text)
    assert rejected and int(rejected[2]) == len(faults.FAULTS)


SAMPLE = re.compile(r"<!-- sample: (?P<command>[^>]+?) -->\n```text\n(?P<text>.*?)```", re.S)
RULE = re.compile(r" *-+( +-+)* *")
TIMES = re.compile(r"\d+(\.\d+)? ?(ns|us|µs|ms|s)\b|\d+\.\d+(e[-+]\d+)?|\bin \d+\.\d+s\b")


def _rows_of(text: str) -> list[str]:
    """The lines a sample's counts and names live in, with the figures that vary (times,
    ratios) left out."""
    return [_row_of(TIMES.sub("#", line)) for line in text.splitlines()]


def _row_of(line: str) -> str:
    """A table's rule row counts its columns only: its widths follow the widest cell, and
    cells hold times (a slower machine prints ``119 ns`` where the sample says ``19.9 ns``)."""
    if RULE.fullmatch(line):
        return f"rule of {len(line.split())} columns"
    return " ".join(line.replace("=", " ").replace("-", " - ").split())


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_samples_are_what_the_command_prints(doc: Path, tmp_path: Path) -> None:
    """A sample marked ``<!-- sample: COMMAND -->`` is what COMMAND prints today, but for
    times and ratios: a count, a column or a name that changed fails here."""
    import shlex

    for found in SAMPLE.finditer(doc.read_text()):
        argv = shlex.split(found["command"])
        assert argv[0] == "pytest", found["command"]
        # samples are printed 80 columns wide, whatever width the calling terminal has
        done = subprocess.run([sys.executable, "-m", *argv, "-p", "no:cacheprovider"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              check=False, env={**os.environ, "COLUMNS": "80"})
        printed = _rows_of(done.stdout)
        missing = [line for line in _rows_of(found["text"]) if line and line not in printed]
        assert not missing, f"{doc.name}: `{found['command']}` no longer prints {missing}"


FAILURE = re.compile(r"<!-- failure sample: (?P<variant>\S+) (?P<case>\S+) seed (?P<seed>\d+) -->\n"
                     r"```text\n\[(?P<phase>[\w-]+)\] (?P<message>[^\n]*)\n")


def test_failure_samples_are_what_the_runner_says(tmp_path: Path) -> None:
    """A failure message shown in the docs is the one the runner gives today for that
    faulty variant, case and seed (a changed figure or wording fails here)."""
    from pytest_xtc.conformance import builtin_cases
    from pytest_xtc.core.execution.runner import Settings, run_case
    from pytest_xtc.selftest import faults

    found = [m for doc in DOCUMENTS for m in FAILURE.finditer(doc.read_text())]
    assert found, "no failure sample in the docs"
    for sample in found:
        case = next(c for c in builtin_cases() if c.id == sample["case"])
        outcome = run_case(faults.make(sample["variant"]), case, tmp_path / sample["case"],
                           Settings(int(sample["seed"])))
        assert (outcome.phase.value, outcome.message) == (sample["phase"], sample["message"])


def test_the_import_total_sample_is_the_importers_wording() -> None:
    """docs/import.md's total line is what the importer prints for those counts."""
    from pytest_xtc.importer.command import Imported, _total

    text = (ROOT / "docs" / "import.md").read_text()
    shown = re.search(r"<!-- import total sample -->\n```text\n([^\n]+)\n", text)
    assert shown, "docs/import.md has no marked total sample"
    said = re.fullmatch(r"total: (\d+) models, (\d+) layers imported as (\d+) case files "
                        r"\((\d+) over the budget\), (\d+) nodes not imported", shown[1])
    assert said, shown[1]
    models, layers, files, over, skipped = map(int, said.groups())
    done = [Imported(f"m{i}") for i in range(models)]
    done[0].files = [(f"f{i}", {}) for i in range(files)]
    done[0].rows = [[f"f{i}", "", "", 1] for i in range(layers)]
    done[0].skipped = [("Op", "why")] * skipped
    assert _total(done, [], over) == shown[1]


# -- counts, file lists and figures in the docs, against a run ------------------------------

NUMBERS = {"four": 4, "five": 5, "six": 6, "seven": 7}


@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of a real host run of two matmuls (GFLOP/s recorded: the chart too)."""
    work = tmp_path_factory.mktemp("doc-bundle")
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                    "--xtc-target=host", "--xtc-report=rep", "-k", "matmul-float32-13x11x7-none"],
                   cwd=work, capture_output=True, text=True, timeout=600, check=False)
    return work / "rep"


def test_the_files_of_a_bundle_are_those_the_docs_name(small_bundle: Path) -> None:
    """"A bundle of N files" wherever the docs say it, and the vendor guide's table of
    them, are what a run writes."""
    written = sorted(p.name for p in small_bundle.iterdir())
    said = [(doc.name, m[1]) for doc in DOCUMENTS
            for m in re.finditer(r"bundle\*? of (\w+) files|with its (\w+) files",
                                 doc.read_text()) for m in [[m[0], m[1] or m[2]]]]
    assert said, "no document says how many files a bundle holds"
    for name, word in said:
        assert NUMBERS.get(word) == len(written), f"{name}: {word} files; a run wrote {written}"
    guide = (ROOT / "docs" / "vendor-guide.md").read_text()
    listed = [cell.strip("`") for cell in table_rows(guide, "| file | content |")]
    assert sorted(listed) == written


def test_the_extras_the_guide_names_are_the_packages() -> None:
    tomllib = pytest.importorskip("tomllib")
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                 ["optional-dependencies"]) - {"dev"}
    text = GUIDE.read_text()
    named = set(re.findall(r"`pytest-xtc\[(\w+)\]`", text[text.index("Extras"):]))
    assert named == extras


def test_the_readmes_nvgpu_figures_add_up_and_are_the_recorded_runs() -> None:
    """The README's nvgpu sentence: its parts sum to its total, and they are the judged
    summary of that run (devicecheck/results)."""
    text = " ".join((ROOT / "README.md").read_text().split())
    said = re.search(r"sm_90 \((\d+) cases, every placement: (\d+) compiled and packed, "
                     r"(\d+) expected compile failures, (\d+) unsupported\).*?judged here on "
                     r"(\S+): (\d+) passed, (\d+) expected failures \((\d+) at compile, (\d+) "
                     r"at run.*?\), (\d+) unsupported, (\d+) failed", text)
    assert said, "README.md: the nvgpu sentence moved or changed its form"
    total, packed, compile_fail, unsupported, day = int(said[1]), int(said[2]), int(said[3]), \
        int(said[4]), said[5].rstrip(":")
    passed, expected, at_compile, at_run, unsupported2, failed = map(int, said.groups()[5:])
    assert packed + compile_fail + unsupported == total
    assert passed + expected + unsupported2 + failed == total
    assert at_compile + at_run == expected and at_compile == compile_fail
    assert passed + at_run + failed == packed and unsupported2 == unsupported
    judged = (ROOT / "devicecheck" / "results" / f"{day}-h100-pack-judged-summary.md").read_text()
    assert f"({total} cases)" in judged
    row = next(line for line in judged.splitlines() if line.startswith("| nvgpu |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # passed, compiled, failed "N (M xfailed)", invalid, skipped, not-supported, waived
    assert int(cells[3]) == passed and int(cells[8]) == unsupported
    failed_cell = re.fullmatch(r"(\d+) \((\d+) xfailed\)", cells[5])
    assert failed_cell and int(failed_cell[1]) + int(cells[9]) == expected + failed


def test_the_readmes_faulty_target_fails_and_says_why(tmp_path: Path) -> None:
    """The README's selftest command: red, each failure with its figures and its rerun
    line."""
    import shlex

    line = readme.faulty_target_line()
    done = subprocess.run([sys.executable, "-m", *shlex.split(line), "-p",
                           "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, check=False)
    readme.assert_failure_explained(done.returncode, done.stdout)
