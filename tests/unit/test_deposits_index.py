"""The standing-watch index (watcher/engine/deposits_index.py) and the collector pause around
a block's payment writes (watcher/engine/collector.py)."""

from __future__ import annotations

import gc

from guard.payment import NATIVE
from watcher.engine.collector import collector_paused
from watcher.engine.deposits_index import SubscriptionIndex
from watcher.store.deposit_records import AddressWatch, SubscriptionRecord

TOKEN = "0x" + "7" * 40
A, B = "0x" + "a" * 40, "0x" + "b" * 40


def _sub(sid: str, assets: str, active: bool = True) -> SubscriptionRecord:
    return SubscriptionRecord(sid, "anvil", "anonymous", assets, None, None, None, None, active, 0)


def _index() -> SubscriptionIndex:
    index = SubscriptionIndex()
    index.add(AddressWatch(1, "sub_1", A, None))
    index.add(AddressWatch(2, "sub_2", A, 40))
    index.add(AddressWatch(3, "sub_2", B, 40))
    index.set_active(
        {"sub_1": _sub("sub_1", f'["{NATIVE}"]'), "sub_2": _sub("sub_2", f'["{TOKEN}"]')}
    )
    return index


def test_an_address_is_watched_by_each_subscription_for_its_own_assets() -> None:
    index = _index()
    native = index.watching(A, NATIVE)
    assert [(w.subscription_id, w.after_block) for w in native] == [("sub_1", None)]
    token = index.watching(A, TOKEN)
    assert [(w.subscription_id, w.after_block) for w in token] == [("sub_2", 40)]
    assert index.watched(B, TOKEN) and not index.watched(B, NATIVE)
    assert not index.watched("0x" + "c" * 40, NATIVE)
    assert index.max_seq == 3


def test_a_subscription_no_longer_matched_watches_nothing() -> None:
    index = _index()
    index.set_active({"sub_1": _sub("sub_1", f'["{NATIVE}"]')})
    assert index.watching(A, TOKEN) == [] and not index.watched(B, TOKEN)
    assert [w.subscription_id for w in index.watching(A, NATIVE)] == ["sub_1"]


def test_the_addresses_follow_the_index_without_a_copy() -> None:
    index = _index()
    seen = index.addresses()
    assert set(seen) == {A, B}
    index.add(AddressWatch(4, "sub_1", "0x" + "d" * 40, None))
    assert "0x" + "d" * 40 in seen and len(seen) == 3


def test_the_collector_leaves_the_indexed_watches_alone() -> None:
    index = _index()
    gc.collect()  # an address's tuple is let go once its items are: two passes at most
    gc.collect()
    assert not any(gc.is_tracked(watches) for watches in index.by_address.values())


def test_the_collector_is_paused_inside_and_restored_as_it_was() -> None:
    was = gc.isenabled()
    try:
        gc.enable()
        with collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()
