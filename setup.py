"""The wheel remembers the commit it was built from: bot/observability/REVISION, which
bot/observability/build.py reads (an installed copy has no git around it). pyproject.toml has
everything else."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithRevision(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs from the checkout, whose git build.py reads
        target = Path(self.build_lib) / "bot" / "observability" / "REVISION"
        if target.exists():  # written before the build (the image's), and copied as data
            return
        spec = importlib.util.spec_from_file_location(
            "_cluster_bot_build", HERE / "bot" / "observability" / "build.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found = module.commit()
        if found != module.UNKNOWN:
            target.write_text(f"{found}\n", encoding="utf-8")


setup(cmdclass={"build_py": BuildPyWithRevision})
