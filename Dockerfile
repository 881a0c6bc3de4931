# One image with every magw daemon (magw-route-agent, magw-gateway, magw-globalnet, magw-egress, magw-egress-agent,
# whose keepalived, conntrackd and conntrack come from Debian) and the magw CLI; the
# manifests in deploy/ choose the command (iperf3: the server and client pods of `magw benchmark --kubeconfig`).
# Debian 12, as scripts/setup.sh: libnftables' official Python binding python3-nftables is a Debian package
# (locked to libnftables1's version), not a PyPI one.
#
#   docker build -t magw:0.1.0 .
FROM debian:12-slim

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv python3-nftables libnftables1 iproute2 nftables ca-certificates \
        keepalived conntrackd conntrack wireguard-go wireguard-tools iperf3 \
    && rm -rf /var/lib/apt/lists/*

# A virtualenv (Debian 12's pip refuses to install into the system Python, PEP 668) that sees ONE Debian
# package, nftables, through a .pth file: the same arrangement as scripts/setup.sh.
RUN python3 -m venv /opt/magw \
    && mkdir -p /opt/magw/debian-nftables \
    && ln -s /usr/lib/python3/dist-packages/nftables /opt/magw/debian-nftables/nftables \
    && echo /opt/magw/debian-nftables > "$(/opt/magw/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/debian-nftables.pth"

COPY pyproject.toml README.md /src/
COPY magw /src/magw
RUN /opt/magw/bin/pip install --no-cache-dir /src \
    && rm -rf /src \
    && /opt/magw/bin/python -c 'import nftables, pyroute2, kubernetes_asyncio, magw'

ENV PATH=/opt/magw/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

CMD ["magw", "--help"]
