"""Records built from a row's values (watcher/store/records.py ``from_values``), as a block's
ripe deposits are read: the same record as the dataclass's own constructor builds, and a row
of the wrong width refused, not half-filled."""

from __future__ import annotations

import pytest

from watcher.store.payment_records import TransferRecord
from watcher.store.records import from_values

pytestmark = pytest.mark.fast

VALUES = (
    7,
    "dep_1",
    "local",
    "0x" + "aa" * 32,
    12,
    "0x" + "bb" * 32,
    3,
    None,
    "0x" + "cc" * 20,
    "5",
)


def test_a_record_from_its_values_is_the_constructors_record() -> None:
    built = from_values(TransferRecord, VALUES)
    assert built == TransferRecord(*VALUES)
    assert (built.block_number, built.log_index, built.value) == (12, None, "5")
    with pytest.raises(AttributeError):
        built.value = "6"  # type: ignore[misc]  # still frozen


@pytest.mark.parametrize("values", [VALUES[:-1], (*VALUES, "extra")])
def test_a_row_of_the_wrong_width_is_refused(values: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match="zip"):
        from_values(TransferRecord, values)
