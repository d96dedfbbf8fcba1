"""Canonical ``server.tool`` names and Gemini's ``server__tool`` function names."""

from __future__ import annotations

import pytest

from tarsy.config import load_config
from tarsy.errors import ConfigError
from tarsy.llm.tool_names import from_function_name, is_canonical, to_function_name
from tarsy.settings import Settings


@pytest.mark.parametrize(
    "name",
    ["kubernetes.pods_get", "k8s-prod.get_logs", "a.b", "srv_1.tool-2", "srv.to__ol"],
)
def test_canonical(name: str) -> None:
    assert is_canonical(name)


@pytest.mark.parametrize(
    "name",
    ["", "nodot", ".tool", "server.", "a.b.c", "a b.c", "srv.tool()", "srv/x.tool", "srv.tool\n"],
)
def test_not_canonical(name: str) -> None:
    assert not is_canonical(name)


@pytest.mark.parametrize(
    ("canonical", "function"),
    [
        ("kubernetes.pods_get", "kubernetes__pods_get"),
        ("k8s-prod.get-logs", "k8s-prod__get-logs"),
        ("a.b", "a__b"),
        ("srv.to__ol", "srv__to__ol"),
        ("my_srv.tool", "my_srv__tool"),
    ],
)
def test_round_trip(canonical: str, function: str) -> None:
    assert to_function_name(canonical) == function
    assert from_function_name(function) == canonical
    assert "." not in function


@pytest.mark.parametrize("name", ["nodot", "a.b.c", "", "srv."])
def test_to_function_name_refuses_non_canonical(name: str) -> None:
    with pytest.raises(ValueError, match=r"server\.tool"):
        to_function_name(name)


@pytest.mark.parametrize("name", ["nosep", "__tool", "server__", "", "a_b"])
def test_from_function_name_refuses_malformed(name: str) -> None:
    with pytest.raises(ValueError, match="server__tool"):
        from_function_name(name)


def test_from_function_name_splits_at_the_first_separator() -> None:
    assert from_function_name("srv__a__b") == "srv.a__b"


@pytest.mark.parametrize("server", ["my__srv", "trail_"])
def test_server_ids_that_cannot_round_trip_are_rejected(server: str) -> None:
    with pytest.raises(ConfigError) as failure:
        load_config(
            Settings(), user_text=f"mcp_servers:\n  {server}: {{url: 'http://127.0.0.1:1/mcp'}}\n"
        )
    assert failure.value.errors[0][0] == f"mcp_servers.{server}"


@pytest.mark.parametrize("server", ["kubernetes", "my-srv", "srv_2"])
def test_accepted_server_ids_round_trip(server: str) -> None:
    config = load_config(
        Settings(), user_text=f"mcp_servers:\n  {server}: {{url: 'http://127.0.0.1:1/mcp'}}\n"
    )
    assert server in config.mcp_servers
    canonical = f"{server}.pods_get"
    assert from_function_name(to_function_name(canonical)) == canonical
