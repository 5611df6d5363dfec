"""chains.beacon.BeaconClient against two real loopback Beacon APIs, one of them down.

A failing endpoint is skipped after two failures in a row (its circuit opens, as an RPC
endpoint's does), the answers come from the other, and when every endpoint fails the error
names the last one without its path or query.
"""

from __future__ import annotations

import pytest

from chains.beacon import BeaconClient
from chains.errors import RpcUnavailable
from tests.support.anvil import Anvil
from tests.support.beacon_server import BeaconServer

pytestmark = pytest.mark.anvil


def test_a_down_endpoint_is_skipped_and_the_other_answers(anvil: Anvil) -> None:
    down, up = BeaconServer(anvil), BeaconServer(anvil)
    try:
        down.fail = True
        client = BeaconClient([down.url + "/", up.url])
        for _ in range(4):
            assert client.finality_update()["version"] == "electra"
        assert down.calls["finality_update"] == 2  # then its circuit is open: not asked
        assert up.calls["finality_update"] == 4
        states = [h["state"] for h in client.health_report()]
        assert states == ["open", "closed"]
        up.fail = True
        with pytest.raises(RpcUnavailable) as error:
            client.updates(3, 2)
        assert str(error.value).startswith(f"{up.url}: updates: ")
        assert "start_period" not in str(error.value)
        client.close()
    finally:
        down.close()
        up.close()
