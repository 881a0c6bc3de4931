"""A refused Config never turns into the default settings: with no earlier good Config there is no snapshot
(the daemons wait and touch nothing), so a typo next to ``cable: wireguard`` cannot make the gateways send
plain VXLAN. With an earlier good Config, that one stays. The file broker and the Kubernetes source alike."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from magw.model.cable import Cable
from magw.sources import FileBroker
from magw.sources.file.assemble import CONFIG_REFUSED, assemble
from magw.sources.kube import mapping
from tests.support.filebroker_world import populate, write

BAD_WIREGUARD = "kind: Config\ncable: wireguard\nwireguard_port: 0\n"


def test_a_refused_first_config_means_no_snapshot(tmp_path: Path) -> None:
    populate(tmp_path, config=BAD_WIREGUARD)
    broker = FileBroker(tmp_path, local_cluster="east")
    with capture_logs() as logs:
        broker.scan()
    assert broker.snapshot is None
    errors = [e["error"] for e in logs if e["event"] == "filebroker.bad_document"]
    assert errors == ["config.yaml: document 1 (Config): wireguard_port: 0 is out of range 1..65535"]
    (incomplete,) = [e for e in logs if e["event"] == "filebroker.incomplete"]
    assert CONFIG_REFUSED in str(incomplete)


def test_a_refused_edit_keeps_the_last_good_config(tmp_path: Path) -> None:
    populate(tmp_path, config="kind: Config\ncable: wireguard\n")
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    assert broker.snapshot is not None and broker.snapshot.config.cable is Cable.WIREGUARD
    write(tmp_path, "config.yaml", BAD_WIREGUARD)
    broker.scan()
    assert broker.snapshot is not None and broker.snapshot.config.cable is Cable.WIREGUARD


def test_no_config_at_all_still_plans_with_the_defaults(tmp_path: Path) -> None:
    populate(tmp_path)
    (tmp_path / "config.yaml").unlink()
    broker = FileBroker(tmp_path, local_cluster="east")
    broker.scan()
    assert broker.snapshot is not None and broker.snapshot.config.cable is Cable.VXLAN


def test_a_config_map_that_cannot_be_mapped_means_no_snapshot() -> None:
    spec = {"cluster_id": "east", "cluster_cidr": ["10.1.0.0/16"], "service_cidr": ["100.1.0.0/16"]}
    cluster = {"metadata": {"name": "east", "namespace": "submariner-operator"}, "spec": spec}
    docs = list(mapping.cluster_docs(cluster))
    assembled = assemble("east", docs, {}, config_refused=True)
    assert (assembled.snapshot, assembled.missing) == (None, CONFIG_REFUSED)
    assert assemble("east", docs, {}).snapshot is not None  # no Config object at all: the defaults
