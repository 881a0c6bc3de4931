"""One check of ``magw lab verify --cni ovn``: what it proved or failed, as one printed line.

Shared by the OVN checks (``magw.lab.verify.ovn``) and the node checks (``magw.lab.verify.ovn_node``).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Check:
    ok: bool
    what: str  # egress | ecmp | ingress
    text: str

    def line(self) -> str:
        return f"{'OK  ' if self.ok else 'FAIL'} {self.what:<7} {self.text}"
