"""The address a peer advertises (node/peer/address.py): `--advertise`, a specific `--listen`,
or, on a wildcard listen, the route's source address; never loopback to a swarm off loopback."""

from __future__ import annotations

import pytest
from swarmnode.node.peer import address
from swarmnode.node.peer.address import advertised, check_reachable, is_loopback, route_source
from swarmnode.node.train.errors import ConfigError

pytestmark = pytest.mark.timeout(30)


def test_advertise_wins_then_a_specific_listen_host():
    assert advertised("0.0.0.0", 7070, "10.0.0.5:9000", ["1.2.3.4:7070"]).addr == "10.0.0.5:9000"
    got = advertised("198.18.120.2", 7070, None, ["198.18.120.1:7070"])
    assert got == ("198.18.120.2:7070", "--listen")


def test_a_wildcard_joiner_advertises_its_source_address_towards_the_seed():
    got = advertised("0.0.0.0", 7071, None, ["127.0.0.1:7070"])
    assert got == ("127.0.0.1:7071", "the route to 127.0.0.1:7070")
    assert advertised("::", 7071, None, ["[::1]:7070"]).addr == "[::1]:7071"


def test_a_wildcard_joiner_with_no_route_to_any_seed_says_so(monkeypatch):
    monkeypatch.setattr(address, "route_source", lambda *a: None)
    with pytest.raises(ConfigError, match=r"no route to any seed .* give --advertise"):
        advertised("0.0.0.0", 7071, None, ["10.9.9.9:7070"])


def test_a_wildcard_founder_takes_the_default_route_else_its_only_address(monkeypatch):
    monkeypatch.setattr(address, "route_source", lambda *a: "192.168.1.7")
    assert advertised("0.0.0.0", 7070, None, []) == ("192.168.1.7:7070", "the default route")
    monkeypatch.setattr(address, "route_source", lambda *a: None)  # no default route
    monkeypatch.setattr(address, "interface_addresses", lambda: ["127.0.0.1", "198.18.120.1"])
    assert advertised("0.0.0.0", 7070, None, []).addr == "198.18.120.1:7070"
    monkeypatch.setattr(address, "interface_addresses", lambda: ["127.0.0.1"])
    assert advertised("0.0.0.0", 7070, None, []).addr == "127.0.0.1:7070"  # nothing else there
    monkeypatch.setattr(
        address, "interface_addresses", lambda: ["127.0.0.1", "10.0.0.2", "10.1.0.2"]
    )
    with pytest.raises(ConfigError, match=r"several addresses \(10.0.0.2, 10.1.0.2\)"):
        advertised("0.0.0.0", 7070, None, [])


def test_route_source_of_loopback_and_of_nothing():
    assert route_source("127.0.0.1", 9) == "127.0.0.1"
    assert route_source("no-such-host.invalid", 9) is None


@pytest.mark.parametrize(
    ("host", "loop"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("198.18.120.1", False), ("example.org", False)],
)  # fmt: skip
def test_is_loopback(host, loop):
    assert is_loopback(host) is loop


def test_loopback_only_for_a_swarm_on_loopback():
    check_reachable("127.0.0.1:7071", ["127.0.0.1:7070", "localhost:1"], "the seed")
    check_reachable("198.18.120.2:7070", ["127.0.0.1:7070"], "the seed")
    with pytest.raises(ConfigError, match=r"loopback address, to the seed at 198\.18\.120\.1:7070"):
        check_reachable("127.0.0.1:7071", ["127.0.0.1:7070", "198.18.120.1:7070"], "the seed")
