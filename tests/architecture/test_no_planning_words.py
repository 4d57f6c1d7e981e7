"""The apps' comments and docstrings, the README and the documentation site say why in their own
words: none cites a planning document ("seed 004", "the seed's list schema", "digest §5.3",
"§2.9", a path under ``/work/shared/``). Such a citation means nothing to a reader and goes
stale as soon as the document moves, so the apps' own text (Python, and the notes, styles and
scripts shipped beside it), ``README.md`` and ``docs/`` are read for them. Migrations are
generated and left alone.

Legitimate uses of the words are not citations and pass: a random seed (``random.seed(0)``,
``seed=0``, ``rng_seed``, a ``--seed`` option), a hash digest (``hexdigest()``,
``digest.update``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.architecture.test_layers import ROOT

APPS = (
    "accounts",
    "api",
    "dag",
    "dashboard",
    "deepwork_server",
    "deepwork_site",
    "insights",
    "mcp_bridge",
    "reviews",
    "templates",
    "tracker",
    "workflow_tools",
    "workflows",
)
TEXT_SUFFIXES = frozenset({".py", ".md", ".txt", ".html", ".css", ".js"})
# What a newcomer reads: the front page, the documentation site and its configuration.
DOCUMENTS = ("README.md", "mkdocs.yml")
DOCS_DIR = "docs"
PLANNING_WORDS = re.compile(
    # "seed", "seeds", "seed's", "Seed 004" as prose; not an attribute, a call, an assignment,
    # a keyword argument, an annotated parameter, a quoted name, a command-line option or part
    # of a longer name (``random.seed(0)``, ``seed = 1``, ``seed: int,``, ``"SEED"``,
    # ``--seed 7``, ``rng_seed``).
    r"(?<![.\w'\"-])seed(?:s|'s)?\b(?!\s*[(=])(?!:\s*\w+\s*[,)=])"
    # A section sign with a number after it ("§5.3", "§ 2"), or a digest named as a document.
    r"|§\s*\d|\bdigest\s*§|\bcompatibility\s+digest\b"
    # A planning document's path on the machine the code was written on.
    r"|/work/shared/",
    re.IGNORECASE,
)


def citations(text: str) -> list[str]:
    """``"<line>: <match>"`` for each planning-document citation in ``text``."""
    return [
        f"{number}: {match.group(0)}"
        for number, line in enumerate(text.splitlines(), start=1)
        for match in PLANNING_WORDS.finditer(line)
    ]


def _read_for_citations(root: Path) -> list[Path]:
    paths = [
        path
        for app in APPS
        for path in sorted((root / app).rglob("*"))
        if path.suffix in TEXT_SUFFIXES and "migrations" not in path.parts
    ]
    paths += [root / name for name in DOCUMENTS]
    paths += sorted((root / DOCS_DIR).rglob("*"))
    return [path for path in paths if path.is_file()]


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for path in _read_for_citations(root):
        text = path.read_text(encoding="utf-8")
        found.extend(f"{path.relative_to(root)}:{where}" for where in citations(text))
    return found


def test_the_apps_and_the_docs_cite_no_planning_documents():
    assert violations() == []


@pytest.mark.parametrize(
    "line",
    [
        '"""The ``agents`` toolset (seed 004): multi-agent DAG workflows."""',
        "# Published workflows (Seed 003): the list another server reads.",
        "# The filters take the seed's lower-case wire values.",
        "# Beyond the seed: a running workflow is deleted only when asked.",
        "# As the seeds say.",
        '"""Parse one ``.deepreview`` file (digest §5.1)."""',
        "# mapped as the recipe maps it (§2.9)",
        "# see §1.8-§1.9 of the compatibility digest.",
        "# the facts come from /work/shared/spec/deepwork-0.14.md",
    ],
)
def test_a_citation_is_found(line):
    assert citations(line) != []


@pytest.mark.parametrize(
    "line",
    [
        "random.seed(0)",
        "rng = random.Random(seed=1234)",
        "seed = int(os.environ.get('SEED', '0'))",
        "def shuffle(items, seed: int) -> None:",
        "rng_seed = 7",
        'SOAK_ARGS="--transitions 3000 --seed 7"',
        "return hashlib.sha256(raw).hexdigest()",
        "digest = hashlib.sha256()",
        "digest.update(chunk)",
        "# Digests this process computed, by (root, path).",
        "# ``digest`` is ``sha256:<hex>`` for a regular file",
    ],
)
def test_a_legitimate_use_is_not_a_citation(line):
    assert citations(line) == []


def test_the_readme_and_the_docs_are_read():
    read = {path.relative_to(ROOT).as_posix() for path in _read_for_citations(ROOT)}
    assert {"README.md", "mkdocs.yml", "docs/index.md", "docs/jobs.md"} <= read


def test_a_planted_citation_is_found(tmp_path):
    """The check is not vacuous: citations planted in an app's code and notes, the README and
    the docs are reported, a migration's are not."""
    for app in APPS:
        (tmp_path / app).mkdir()
    (tmp_path / "workflows" / "dag.py").write_text(
        '"""DAG workflows (seed 004)."""\n\nimport random\n\nrandom.seed(0)\n'
    )
    (tmp_path / "reviews" / "config.py").write_text("# The keys 0.14 added (digest §5.3).\n")
    (tmp_path / "tracker" / "AGENTS.md").write_text("Facts: `/work/shared/spec/x.md`.\n")
    (tmp_path / "tracker" / "migrations").mkdir()
    (tmp_path / "tracker" / "migrations" / "0001_initial.py").write_text("# seed 002\n")
    (tmp_path / "README.md").write_text("# x\n\nThe tracker (seed 002) records tasks.\n")
    (tmp_path / "docs" / "toolsets").mkdir(parents=True)
    (tmp_path / "docs" / "toolsets" / "agents.md").write_text("As the seed's schema says.\n")
    assert violations(tmp_path) == [
        "reviews/config.py:1: digest §",
        "tracker/AGENTS.md:1: /work/shared/",
        "workflows/dag.py:1: seed",
        "README.md:3: seed",
        "docs/toolsets/agents.md:1: seed's",
    ]
