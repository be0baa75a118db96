"""The suite's CPU report (tests/cpu_report.py) adds each test to its kind."""

from tests.cpu_report import summary


def test_each_test_counts_once_in_the_first_kind_it_matches() -> None:
    rows = [("tests/test_replicas.py::test_three@procs-restarts", 60.0, 20.0),
            ("tests/e2e/test_budgets.py::test_twenty[postgres]@procs", 10.0, 5.0),
            ("tests/e2e/test_budgets.py::test_twenty[postgres]", 20.0, 10.0),
            ("tests/e2e/test_ledger_figures.py::test_every[first-half]", 100.0, 50.0),
            ("tests/e2e/test_buttons.py::test_extend[sqlite]", 4.0, 3.0),
            ("tests/domain/test_idle.py::test_x", 0.1, 0.1)]
    lines = summary(rows).splitlines()
    assert "88 s in all" in lines[1]
    kinds = {line[:34].strip(): line[34:].split() for line in lines[2:7]}
    assert kinds["real processes"] == ["2", "70", "s", "25", "s", "28.4%"]
    assert kinds["ledger"][:4] == ["1", "100", "s", "50"]
    assert kinds["in-process, PostgreSQL"][:4] == ["1", "20", "s", "10"]
    assert kinds["in-process e2e / saga, SQLite"][:4] == ["1", "4", "s", "3"]
    assert kinds["the rest"][:4] == ["1", "0", "s", "0"]
    assert "50.0 s" in lines[8] and "first-half" in lines[8]  # the costliest first
