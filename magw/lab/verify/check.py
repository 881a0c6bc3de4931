"""One check of ``magw lab verify --cni ovn``: what it proved or failed, as one printed line.

Shared by the ``ovn-trace`` checks (``magw.lab.verify.ovn``), the node checks (``magw.lab.verify.ovn_node``) and
the packet checks (``magw.lab.verify.ovn_packets``). ``how`` says which kind of proof a line is: ``trace`` (the
logical pipeline, by ``ovn-trace``), ``packet`` (real traffic between pod namespaces) or ``state`` (what the
kernel and Open vSwitch of a node hold, asked of them).
"""

from __future__ import annotations

import attrs

HOWS = ("trace", "packet", "state")


@attrs.frozen
class Check:
    ok: bool
    what: str  # egress | ecmp | ingress | node | pods
    text: str
    how: str = attrs.field(default="trace", kw_only=True, validator=attrs.validators.in_(HOWS))

    def line(self) -> str:
        return f"{'OK  ' if self.ok else 'FAIL'} {self.how:<6} {self.what:<7} {self.text}"
