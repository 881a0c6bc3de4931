"""Nft, our wrapper of Debian's python3-nftables: namespaces, errors, one-batch transactions (nft 1.0.6 facts).

The kernel tests create throwaway namespaces; the nft command (not our binding)
checks what landed where.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import pytest

from magw.drivers.netns import NETNS_DIR, in_netns
from magw.drivers.nft import Nft, NftDriver, NftError, NoSuchNetns
from magw.drivers.nft.libnft import _one_line
from tests.support.netns import netns, nft_json, run

DEBIAN_DIST = "/usr/lib/python3/dist-packages"  # where python3-nftables installs the package


def _tables(ns: str) -> list[str]:
    """Table names in ``ns``, listed by the nft command."""
    return sorted(i["table"]["name"] for i in nft_json(ns, "list", "tables")["nftables"] if "table" in i)


def _thread_netns() -> int:
    return os.stat("/proc/thread-self/ns/net").st_ino


def _doc(*commands: dict[str, Any]) -> dict[str, Any]:
    return {"nftables": list(commands)}


def _table(name: str = "t") -> dict[str, Any]:
    return {"table": {"family": "ip", "name": name}}


def _chain(name: str, table: str = "t") -> dict[str, Any]:
    return {"chain": {"family": "ip", "table": table, "name": name}}


def test_error_text_is_one_line_without_locations() -> None:
    """The library's multi-line error text becomes one line without ``internal:0:0-0:``."""
    text = "internal:0:0-0: Error: Could not process rule: No such file or directory\n\n"
    assert _one_line(text) == "Error: Could not process rule: No such file or directory"
    assert _one_line("Error: x\nadd rule ip t c accept\n   ^^^\n") == "Error: x | add rule ip t c accept | ^^^"
    assert _one_line("") == "libnftables failed without an error message"


def test_missing_namespace_is_an_error_and_is_not_created() -> None:
    """Nft(NAME) of a missing namespace raises NoSuchNetns and never creates it."""
    name = f"magwt-missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(NoSuchNetns, match=name):
        Nft(name)
    assert os.path.exists(os.path.join(NETNS_DIR, name)) is False


@pytest.mark.kernel
def test_commands_land_in_the_context_namespace_only() -> None:
    """A table added through Nft(A) exists in A, not in B, and the thread is back home afterwards."""
    home = _thread_netns()
    with netns() as a, netns() as b, Nft(a) as nft:
        nft.json_cmd(_doc({"add": _table("only_a")}))
        assert (_tables(a), _tables(b), _thread_netns()) == (["only_a"], [], home)


@pytest.mark.kernel
def test_context_socket_is_bound_at_creation() -> None:
    """libnftables 1.0.6 opens its socket in nft_ctx_new: a context made in A keeps acting in A from B.

    This is why the context is created inside the namespace. If this fails, a new
    libnftables opens its socket lazily, and entering the namespace around every
    command (which Nft also does) is what keeps us right.
    """
    with netns() as a, netns() as b, Nft(a) as nft:
        nft.netns = b  # from now on every command runs with the thread in B
        nft.json_cmd(_doc({"add": _table("made_from_b")}))
        assert (_tables(a), _tables(b)) == (["made_from_b"], [])


@pytest.mark.kernel
def test_thread_returns_home_after_an_error(ns: str) -> None:
    """A failing command raises NftError with the library's text and leaves the thread in its namespace."""
    home = _thread_netns()
    with Nft(ns) as nft, pytest.raises(NftError) as err:
        nft.json_cmd(_doc({"add": {"rule": {"family": "ip", "table": "nope", "chain": "c", "expr": []}}}))
    assert ("No such file or directory" in err.value.message, _thread_netns()) == (True, home)


@pytest.mark.kernel
def test_thread_returns_home_when_the_block_raises(ns: str) -> None:
    """in_netns puts the thread back even when the code inside raises."""
    home = _thread_netns()
    with pytest.raises(RuntimeError), in_netns(ns):
        assert _thread_netns() != home
        raise RuntimeError("boom")
    assert _thread_netns() == home


@pytest.mark.kernel
def test_list_table_json_of_missing_and_present_tables(ns: str) -> None:
    """list_table_json is None for a missing table and nft's JSON for a present one."""
    with Nft(ns) as nft:
        assert nft.list_table_json("ip", "t") is None
        run(ns, "nft", "add table ip t; add chain ip t c")
        doc = nft.list_table_json("ip", "t")
    assert doc is not None
    kinds = [next(iter(item)) for item in doc["nftables"]]
    assert kinds == ["metainfo", "table", "chain"]


@pytest.mark.kernel
def test_add_delete_add_replaces_whether_or_not_the_table_existed(ns: str) -> None:
    """``add; delete; add table`` in one batch works on a missing table and empties an existing one."""
    replace = _doc({"add": _table()}, {"delete": _table()}, {"add": _table()}, {"add": _chain("fresh")})
    with Nft(ns) as nft:
        nft.json_cmd(replace)
        run(ns, "nft", "add chain ip t stale")
        nft.json_cmd(replace)
    chains = [i["chain"]["name"] for i in nft_json(ns, "list", "table", "ip", "t")["nftables"] if "chain" in i]
    assert chains == ["fresh"]


@pytest.mark.kernel
def test_add_delete_of_a_missing_table_succeeds(ns: str) -> None:
    """``add; delete table`` in one batch deletes a table whether or not it existed."""
    with Nft(ns) as nft:
        nft.json_cmd(_doc({"add": _table()}, {"delete": _table()}))
        assert _tables(ns) == []
        run(ns, "nft", "add table ip t")
        nft.json_cmd(_doc({"add": _table()}, {"delete": _table()}))
    assert _tables(ns) == []


@pytest.mark.kernel
def test_a_failing_batch_changes_nothing(ns: str) -> None:
    """One bad command (a dangling jump) fails the whole document: the earlier delete is undone too."""
    run(ns, "nft", "add table ip t; add chain ip t old")
    bad = _doc(
        {"add": _table()},
        {"delete": _table()},
        {"add": _table()},
        {"add": _chain("new")},
        {"add": {"rule": {"family": "ip", "table": "t", "chain": "new", "expr": [{"jump": {"target": "nope"}}]}}},
    )
    with Nft(ns) as nft, pytest.raises(NftError):
        nft.json_cmd(bad)
    chains = [i["chain"]["name"] for i in nft_json(ns, "list", "table", "ip", "t")["nftables"] if "chain" in i]
    assert chains == ["old"]


@pytest.mark.kernel
def test_json_cmd_returns_parsed_output(ns: str) -> None:
    """A list command returns nft's JSON as a dict; a write returns ``{}``."""
    with Nft(ns) as nft:
        assert nft.json_cmd(_doc({"add": _table()})) == {}
        out = nft.json_cmd(_doc({"list": {"tables": {"family": "ip"}}}))
    assert [i["table"]["name"] for i in out["nftables"] if "table" in i] == ["t"]


@pytest.mark.kernel
def test_closed_context_refuses_commands(ns: str) -> None:
    """After close() (twice is fine) a command raises NftError instead of touching freed memory."""
    nft = Nft(ns)
    nft.close()
    nft.close()
    with pytest.raises(NftError, match="closed"):
        nft.json_cmd(_doc({"add": _table()}))


def test_driver_of_a_missing_namespace_is_an_error() -> None:
    """NftDriver(NAME) of a missing namespace raises NoSuchNetns (we never create one)."""
    with pytest.raises(NoSuchNetns):
        NftDriver(f"magwt-missing-{uuid.uuid4().hex[:8]}")


def test_driver_needs_a_table() -> None:
    """A driver owning no table is a configuration error naming the field."""
    with pytest.raises(ValueError, match=r"^tables: "):
        NftDriver(None, tables=(), nft=object())  # type: ignore[arg-type]  # never used: refused first


def test_the_venv_sees_debians_nftables_package_and_nothing_else_of_debians() -> None:
    """``nftables`` is Debian's python3-nftables, exposed alone: /usr/lib/python3/dist-packages is not on sys.path.

    scripts/setup.sh lists a directory holding only a symlink to the package; a
    broader path would let Debian's other modules shadow the venv's.
    """
    import sys

    import nftables

    package = os.path.dirname(nftables.__file__)
    entry = os.path.dirname(package)
    assert (os.path.realpath(package), DEBIAN_DIST not in map(os.path.normpath, sys.path)) == (
        os.path.join(DEBIAN_DIST, "nftables"),
        True,
    )
    assert sorted(os.listdir(entry)) == ["nftables"]


@pytest.mark.kernel
def test_commands_go_through_the_official_binding(ns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nft drives libnftables through python3-nftables' ``Nftables.json_cmd`` and ``cmd``."""
    import nftables

    calls: list[str] = []
    json_cmd, cmd = nftables.Nftables.json_cmd, nftables.Nftables.cmd

    def spy_json(self: Any, doc: Any) -> Any:
        calls.append("json_cmd")
        return json_cmd(self, doc)

    def spy_cmd(self: Any, text: Any) -> Any:
        calls.append("cmd")
        return cmd(self, text)

    monkeypatch.setattr(nftables.Nftables, "json_cmd", spy_json)
    monkeypatch.setattr(nftables.Nftables, "cmd", spy_cmd)
    with Nft(ns) as nft:
        nft.json_cmd(_doc({"add": _table("via_json")}))
        calls.append("--")
        nft.run("add table ip via_text\n")
    # the binding's json_cmd calls its own cmd underneath
    assert (calls, _tables(ns)) == (["json_cmd", "cmd", "--", "cmd"], ["via_json", "via_text"])


@pytest.mark.kernel
def test_text_commands_return_text_and_fail_on_one_line(ns: str) -> None:
    """run() takes nft text (the lease table uses it): output is str (JSON: the flag is set once), errors one line."""
    with Nft(ns) as nft:
        nft.run("add table ip t\nadd set ip t s { type ipv4_addr; }\n")
        listed = json.loads(nft.run("list set ip t s\n"))
        with pytest.raises(NftError) as err:
            nft.run("add element ip t s { 10.0.0.1 }\nadd element ip t nope { 10.0.0.2 }\n")
    assert [next(iter(i)) for i in listed["nftables"]] == ["metainfo", "set"]
    assert ("\n" in err.value.message, "No such file or directory" in err.value.message) == (False, True)


@pytest.mark.kernel
def test_driver_observes_missing_present_and_foreign_tables(ns: str) -> None:
    """NftDriver.observe (listing as text, parsed after the heap is given back): None while ``ip magw`` is
    missing, even next to another table; the table with its set elements once it exists."""
    with NftDriver(ns) as driver:
        run(ns, "nft", "add table ip other")
        assert driver.observe() is None
        run(ns, "nft", "add table ip magw; add set ip magw s { type ipv4_addr; flags interval; }")
        run(ns, "nft", "add element ip magw s { 10.1.0.0/16, 10.9.9.9 }")
        table = driver.observe()
    assert table is not None
    assert [(s.name, s.elements) for s in table.sets] == [("s", ("10.1.0.0/16", "10.9.9.9"))]
