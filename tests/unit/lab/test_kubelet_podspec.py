"""What the lab kubelet makes of a Pod (magw.lab.kubelet.podspec): the commands it resolves and the ones it refuses
(fail closed: it runs as root), the defaults it fills in, where it schedules a pod, and its restart back-off."""

from __future__ import annotations

from typing import Any

import pytest

from magw.lab.kubelet import podspec
from magw.lab.kubelet.podspec import Refused, choose_node, parse, resolve_argv, restart_delay, restarts_after

PY = "/work/lab/.venv/bin/python"  # the lab's interpreter, as the kubelet passes it
TRAFFIC = "magw.lab.payload.traffic"
ALLOWED = "python -m magw.<module>"  # what a refusal of python names as allowed


def _pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "echo", "namespace": "verify", "uid": "u-1"},
        "spec": {"containers": list(containers), **spec},
    }


def _container(name: str = "c", command: Any = ("python", "-m", TRAFFIC), **more: Any) -> dict[str, Any]:
    return {"name": name, "image": "magw:dev", "command": list(command), **more}


# --- resolve_argv ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("python", ["python", "python3", "/usr/bin/python3", "/usr/local/bin/python"])
def test_python_dash_m_magw_module_runs_with_the_given_interpreter(python: str) -> None:
    argv = resolve_argv([python, "-m", TRAFFIC], ["serve", "--port", "8080"], PY)
    assert argv == (PY, "-m", TRAFFIC, "serve", "--port", "8080")


def test_command_and_args_are_joined_before_resolving() -> None:
    """Kubernetes runs ``command + args``: the module may come in ``args``."""
    assert resolve_argv(["python3"], ["-m", "magw.x", "--flag"], PY) == (PY, "-m", "magw.x", "--flag")


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (["python", "-c", "import os; os.system('id')"], []),
        (["python", "-m", "os"], []),
        (["python", "-m", "magw"], []),  # a module of magw, not the package itself
        (["python", "-m", "magwx.y"], []),
        (["python", "-m", "magw.x;id"], []),
        (["python3", "-m"], []),
        (["python"], []),
        (["python", "script.py", "-m", "magw.x"], []),
    ],
)
def test_python_other_than_dash_m_magw_is_refused_naming_what_is_allowed(command: list[str], args: list[str]) -> None:
    with pytest.raises(Refused) as refused:
        resolve_argv(command, args, PY)
    message = str(refused.value)
    assert ALLOWED in message and "\n" not in message
    assert message.startswith(command[0])


@pytest.mark.parametrize(
    "command",
    [["sh", "-c", "python -m magw.x"], ["bash"], ["/bin/bash", "-c", "id"], ["python3.11", "-m", "magw.x"],
     ["/opt/evil/iperf3x", "-s"], ["env", "python", "-m", "magw.x"]],
)  # fmt: skip
def test_other_programs_are_refused_naming_what_is_allowed(command: list[str]) -> None:
    with pytest.raises(Refused) as refused:
        resolve_argv(command, [], PY)
    message = str(refused.value)
    assert message.startswith(f"{command[0]}: ")
    assert ALLOWED in message and "iperf3" in message


def test_a_container_without_a_command_is_refused() -> None:
    """Its image's entrypoint is not known here; args alone are not a command either."""
    for args in ([], ["python", "-m", "magw.x"]):
        with pytest.raises(Refused, match="without a command"):
            resolve_argv([], args, PY)


def test_iperf3_passes_through_as_the_hosts() -> None:
    assert resolve_argv(["iperf3"], ["-s", "-p", "5201"], PY) == ("iperf3", "-s", "-p", "5201")
    assert resolve_argv(["/usr/bin/iperf3", "-c", "10.2.1.10"], ["-t", "5"], PY) == ("iperf3", "-c", "10.2.1.10",
                                                                                     "-t", "5")  # fmt: skip


# --- parse ----------------------------------------------------------------------------------------------------


def test_parse_fills_the_defaults() -> None:
    run = parse(_pod(_container(args=["serve"])), PY)
    assert run == podspec.PodRun(
        namespace="verify",
        name="echo",
        uid="u-1",
        node=None,
        node_selector=(),
        host_network=False,
        restart_policy="Always",
        grace=podspec.MAX_GRACE,
        containers=(podspec.ContainerRun(name="c", argv=(PY, "-m", TRAFFIC, "serve"), env=()),),
    )


def test_parse_keeps_what_the_spec_says() -> None:
    pod = _pod(
        _container("server", env=[{"name": "A", "value": "1"}, {"name": "EMPTY"}]),
        _container("client", ["iperf3", "-c", "x"]),
        nodeName="east-w1",
        nodeSelector={"z": "2", "a": "1"},
        hostNetwork=True,
        restartPolicy="OnFailure",
        terminationGracePeriodSeconds=2,
    )
    run = parse(pod, PY)
    assert run.node == "east-w1"
    assert run.node_selector == (("a", "1"), ("z", "2"))
    assert run.host_network is True
    assert run.restart_policy == "OnFailure"
    assert run.grace == 2.0
    assert [c.name for c in run.containers] == ["server", "client"]
    assert run.containers[0].env == (("A", "1"), ("EMPTY", ""))
    assert run.containers[1].argv == ("iperf3", "-c", "x")


@pytest.mark.parametrize(("given", "grace"), [(30, podspec.MAX_GRACE), (3600, podspec.MAX_GRACE), (0, 0.0),
                                              (1.5, 1.5), (None, podspec.MAX_GRACE)])  # fmt: skip
def test_termination_grace_is_capped_at_max_grace(given: Any, grace: float) -> None:
    spec = {} if given is None else {"terminationGracePeriodSeconds": given}
    assert parse(_pod(_container(), **spec), PY).grace == grace


def test_env_value_from_is_refused() -> None:
    env = [{"name": "OK", "value": "1"}, {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    with pytest.raises(Refused, match=r"container c: env NODE: valueFrom is not supported"):
        parse(_pod(_container(env=env)), PY)


def test_an_env_entry_without_a_name_is_refused() -> None:
    with pytest.raises(Refused, match="env entry without a name"):
        parse(_pod(_container(env=[{"value": "1"}])), PY)


def test_init_containers_are_refused() -> None:
    pod = _pod(_container(), initContainers=[_container("init")])
    with pytest.raises(Refused, match="init containers are not supported"):
        parse(pod, PY)


@pytest.mark.parametrize("policy", ["Sometimes", "always", "never"])
def test_an_unknown_restart_policy_is_refused_naming_the_choices(policy: str) -> None:
    with pytest.raises(Refused) as refused:
        parse(_pod(_container(), restartPolicy=policy), PY)
    assert repr(policy) in str(refused.value)
    assert "Always, OnFailure, Never" in str(refused.value)


@pytest.mark.parametrize("policy", ["Always", "OnFailure", "Never"])
def test_the_restart_policies_are_accepted(policy: str) -> None:
    assert parse(_pod(_container(), restartPolicy=policy), PY).restart_policy == policy


def test_a_pod_without_containers_is_refused() -> None:
    for pod in (_pod(), {"metadata": {"name": "x"}}):
        with pytest.raises(Refused, match="without containers"):
            parse(pod, PY)


def test_one_refused_container_refuses_the_pod() -> None:
    with pytest.raises(Refused, match=r"^sh: "):
        parse(_pod(_container("ok"), _container("bad", ["sh", "-c", "true"])), PY)


@pytest.mark.parametrize("command", ["python -m magw.x", [1, 2], {"a": "b"}])
def test_a_command_that_is_not_a_list_of_strings_is_refused(command: Any) -> None:
    pod = _pod({"name": "c", "command": command})
    with pytest.raises(Refused, match=r"c\.command: not a list of strings"):
        parse(pod, PY)


def test_refused_is_a_value_error() -> None:
    """Callers that catch ValueError (and the kubelet, which catches Refused) both see it."""
    assert issubclass(Refused, ValueError)


# --- choose_node ----------------------------------------------------------------------------------------------

NODES = {
    "east-w2": {podspec.HOSTNAME_LABEL: "east-w2", "zone": "b"},
    "east-w1": {podspec.HOSTNAME_LABEL: "east-w1", "zone": "a"},
    "east-w3": {podspec.HOSTNAME_LABEL: "east-w3", "zone": "b", "gw": "true"},
}


def _run(**selector: str) -> podspec.PodRun:
    return parse(_pod(_container(), nodeSelector=selector), PY)


def test_choose_node_picks_the_least_loaded_then_by_name() -> None:
    assert choose_node(_run(), NODES, {}) == "east-w1"
    assert choose_node(_run(), NODES, {"east-w1": 1}) == "east-w2"
    assert choose_node(_run(), NODES, {"east-w1": 1, "east-w2": 1}) == "east-w3"
    assert choose_node(_run(), NODES, {"east-w1": 2, "east-w2": 1, "east-w3": 1}) == "east-w2"
    assert choose_node(_run(), NODES, {"other": 0, "east-w1": 3, "east-w2": 3, "east-w3": 3}) == "east-w1"


def test_choose_node_honours_the_node_selector() -> None:
    assert choose_node(_run(zone="b"), NODES, {}) == "east-w2"
    assert choose_node(_run(zone="b"), NODES, {"east-w2": 1}) == "east-w3"
    assert choose_node(_run(zone="b", gw="true"), NODES, {"east-w3": 10}) == "east-w3"
    assert choose_node(_run(**{podspec.HOSTNAME_LABEL: "east-w2"}), NODES, {"east-w2": 5}) == "east-w2"


def test_choose_node_refuses_when_no_node_matches() -> None:
    with pytest.raises(Refused, match="no node of the cluster matches nodeSelector gw=true,zone=a"):
        choose_node(_run(zone="a", gw="true"), NODES, {})
    with pytest.raises(Refused):
        choose_node(_run(), {}, {})


# --- restarts -------------------------------------------------------------------------------------------------


def test_restart_delay_doubles_up_to_thirty_seconds() -> None:
    assert [restart_delay(n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert restart_delay(1000) == 30
    assert all(isinstance(restart_delay(n), float) for n in range(7))


@pytest.mark.parametrize(
    ("policy", "code", "restarts"),
    [("Always", 0, True), ("Always", 1, True), ("Always", -9, True),
     ("OnFailure", 0, False), ("OnFailure", 1, True), ("OnFailure", 137, True), ("OnFailure", -15, True),
     ("Never", 0, False), ("Never", 1, False)],
)  # fmt: skip
def test_restarts_after_follows_the_restart_policy(policy: str, code: int, restarts: bool) -> None:
    assert restarts_after(policy, code) is restarts
