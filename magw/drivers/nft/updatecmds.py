"""The transaction of an in-place table change (``magw.reconcile.nftupdate``), as one libnftables JSON document.

One document is one netlink batch, so one kernel transaction::

    flush chain ...          # the kept chains whose rules change, and the chains about to be deleted
    delete element ...       # the kept sets' and maps' elements that go
    delete chain ...         # deleted or redefined chains (empty now)
    delete set/map ...       # deleted or reshaped sets and maps (no rule names them any more)
    add chain ...            # new and redefined chains
    add set/map ...          # new and reshaped sets and maps, with their elements
    add element ...          # the kept sets' and maps' new elements
    add rule ...             # every rule of the flushed and the added chains, in the table's order

Flushes come first so that no rule still names a set or chain that goes; element deletes before adds for the
reasons of ``elemcmds``. No ``add table`` and no ``delete table``: a table that is not there, or that is not the one
the update was computed from, makes the kernel refuse the batch (a missing chain or set, a set still in use), and
the driver then replaces the whole table.
"""

from __future__ import annotations

import json

from magw.desired.nft.values import NftTable
from magw.drivers.nft import codec, elemcmds
from magw.reconcile.nftupdate import TableUpdate


def _obj(kind: str, table: NftTable, name: str) -> dict[str, dict[str, str]]:
    return {kind: {"family": table.family, "table": table.name, "name": name}}


def update_document_text(table: NftTable, update: TableUpdate, *, checked: bool = False) -> str:
    """The document that turns the table ``update`` was computed from into ``table``.

    ``checked``: ``preflight.table_errors(table)`` found nothing, so the elements are canonical (as
    ``codec.replace_document_text``); the element deltas are always written from checked text.
    """
    fam, name = table.family, table.name
    parts = [json.dumps({"flush": _obj("chain", table, c)}) for c in (*update.flush, *update.delete_chains)]
    parts += elemcmds.delete_command_texts(fam, name, update.elements)
    parts += [json.dumps({"delete": _obj("chain", table, c)}) for c in update.delete_chains]
    parts += [json.dumps({"delete": _obj("set", table, s)}) for s in update.delete_sets]
    parts += [json.dumps({"delete": _obj("map", table, m)}) for m in update.delete_maps]
    parts += [json.dumps(codec.chain_json(table, c)) for c in update.add_chains]
    parts += [codec.set_text(table, s, checked=checked) for s in update.add_sets]
    parts += [codec.map_text(table, m, checked=checked) for m in update.add_maps]
    parts += elemcmds.add_command_texts(fam, name, update.elements)
    parts += [json.dumps(codec.rule_json(table, r)) for r in update.rules]
    return '{"nftables": [' + ", ".join(parts) + "]}"
