"""Another release of this tree, built at test time: for upgrade and rollback tests.

The release before this one (main at 39e1bb8) predates the compatibility record, so it can't be
shown running on a newer schema; and "this tree minus its newest migration" stops being a real
release once the integrator chains other branches' migrations (their code reads their columns).
So the pair is THIS build and the NEXT one: a copy of `bot/` and `storage/` with one more
migration on top of this build's head — additive and marked compatible (a new table and a
nullable column, as an expand step is), or a contract step marked incompatible. Run as real
processes (PYTHONPATH = the copy), the next release upgrades this build's database while this
build's replicas run; rolling back is this build starting on the next release's schema.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

from storage.migrations import head_revision, migrations, oldest_compatible

REPO = Path(__file__).resolve().parent.parent
# Every migration head that reached main since 0014 (the schema says which code may run on it),
# with the main commit that landed it: the earlier releases a rollback goes back to
# (tests/test_rollback_releases.py). Add each new head's commit once it is on main.
RELEASES = [
    ("0014", "1f98bca"),
    ("0015", "c9df972"),
    ("0016", "7acdd92"),
    ("0017", "523152a"),
    ("0018", "c4309ae"),
    ("0019", "5b7e378"),
    ("0020", "c222dac"),
    ("0021", "58c3e27"),
    ("0022", "e66547b"),
    ("0023", "0f64c37"),
    ("0024", "22737a3"),
]
NEXT_REVISION = "9001_next"


def must_run(head: str) -> bool:
    """Whether the schema this build leaves says code at `head` may run on it (else that
    release must refuse): this build's markers, as `schema_compat` records them."""
    known = [m.revision for m in migrations()]
    return known.index(head) >= known.index(oldest_compatible(head_revision()))

_EXPAND = '''
def upgrade() -> None:
    op.create_table("next_notes", sa.Column("id", sa.Integer(), primary_key=True),
                    sa.Column("note", sa.Text(), nullable=False))
    op.add_column("clusters", sa.Column("next_note", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("clusters", "next_note")
    op.drop_table("next_notes")
'''
_CONTRACT = '''
def upgrade() -> None:
    # Older code writes this column: a contract step, so marked incompatible.
    op.drop_column("requests", "decision_note")


def downgrade() -> None:
    op.add_column("requests", sa.Column("decision_note", sa.Text(), nullable=True))
'''


def next_release(directory: Path, *, compatible: bool = True) -> Path:
    """A copy of this build with one more migration; returns the directory for PYTHONPATH."""
    root = directory / ("next" if compatible else "next-incompatible")
    for package in ("bot", "storage"):
        shutil.copytree(REPO / package, root / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    body = _EXPAND if compatible else _CONTRACT
    (root / "storage" / "migrations" / "versions" / f"{NEXT_REVISION}.py").write_text(
        f'"""the next release: {"expand" if compatible else "contract"}"""\n\n'
        "import sqlalchemy as sa\nfrom alembic import op\n\n"
        f'revision = "{NEXT_REVISION}"\ndown_revision = "{head_revision()}"\n'
        "branch_labels = None\ndepends_on = None\n"
        f"compatible_with_previous = {compatible}\n{body}")
    return root


def pyproject_version() -> str:
    """This tree's version, as kept by hand in pyproject.toml (CHANGELOG.md's newest release)."""
    with (REPO / "pyproject.toml").open("rb") as f:
        found: str = tomllib.load(f)["project"]["version"]
    return found


def head_commit() -> str:
    """The commit this tree is checked out at."""
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True, timeout=30).stdout.strip()


def migrations_dir(release: Path) -> Path:
    return release / "storage" / "migrations"
