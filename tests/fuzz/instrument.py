"""Which modules benchmarks/fuzz.py instruments per target; no magw import here, so the runner can read it
before atheris instruments magw's modules as they are imported."""

# What benchmarks/fuzz.py instruments for each target (libFuzzer's cov/ft count these modules' edges only):
# the parser and what it calls, not the rest of magw, whose instrumentation would only cost start-up time.
INSTRUMENT: dict[str, list[str]] = {
    "snapshot_yaml": ["magw.snapshot", "magw.model"],
    "broker_file": ["magw.sources.file", "magw.snapshot", "magw.model"],
    "lab_topology": ["magw.lab.spec", "magw.snapshot.yamlstrict"],
    "kube_object": ["magw.sources.kube.mapping", "magw.sources.file", "magw.snapshot", "magw.model"],
    "netlink_nexthop": ["magw.drivers.netlink"],
    "netlink_dump": ["magw.drivers.netlink"],
    "nft_json": ["magw.drivers.nft.codec", "magw.drivers.nft.elements"],
    "wg_dump": ["magw.drivers.wireguard.tool"],
}
