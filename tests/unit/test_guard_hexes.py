"""Tests of guard.hexes: the hash and address validators used at every edge."""

from collections.abc import Callable

import pytest

from guard.errors import GuardError, InvalidAddress, InvalidHash
from guard.hexes import parse_address, parse_block_hash, parse_tx_hash

HASH = "0x" + "ab12" * 16
ADDRESS = "0x" + "cd34" * 10

HashParser = Callable[..., str]
HASH_PARSERS: list[HashParser] = [parse_tx_hash, parse_block_hash]

BAD_HASHES: list[object] = [
    "",
    "0x",
    HASH[:-1],  # 63 digits
    HASH + "0",  # 65 digits
    HASH[2:],  # no 0x
    "00" + HASH[2:],  # wrong prefix, right length
    "0x" + "g" + "0" * 63,  # non-hex digit
    "0x" + "0" * 63 + "z",
    " " + HASH,
    HASH + " ",
    HASH + "\n",
    "0x" + "\u0661" * 64,  # Arabic-Indic digit one: a unicode digit, not hex
    ADDRESS,  # an address is not a hash
    None,
    0,
    int(HASH, 16),
    HASH.encode(),
    [HASH],
]

BAD_ADDRESSES: list[object] = [
    "",
    "0x",
    ADDRESS[:-1],
    ADDRESS + "0",
    ADDRESS[2:],
    "0x" + "0" * 39 + "G",
    ADDRESS + "\n",
    HASH,  # a hash is not an address
    None,
    42,
    int(ADDRESS, 16),
    ADDRESS.encode(),
]


@pytest.mark.parametrize("parse", HASH_PARSERS)
def test_hash_good_is_returned_unchanged(parse: HashParser) -> None:
    assert parse(HASH) == HASH


@pytest.mark.parametrize("parse", HASH_PARSERS)
@pytest.mark.parametrize("spelling", [HASH.upper(), "0x" + HASH[2:].upper(), "0x" + "Ab12" * 16])
def test_hash_any_case_is_normalised_to_lower(parse: HashParser, spelling: str) -> None:
    result = parse(spelling)
    assert result == HASH
    assert result.startswith("0x")


@pytest.mark.parametrize("parse", HASH_PARSERS)
@pytest.mark.parametrize("value", BAD_HASHES, ids=repr)
def test_hash_bad_is_refused(parse: HashParser, value: object) -> None:
    with pytest.raises(InvalidHash) as info:
        parse(value)
    assert info.value.value == value


@pytest.mark.parametrize(
    ("parse", "default_what"), [(parse_tx_hash, "tx_hash"), (parse_block_hash, "block_hash")]
)
def test_hash_error_names_the_field(parse: HashParser, default_what: str) -> None:
    with pytest.raises(InvalidHash) as info:
        parse("nope")
    assert info.value.what == default_what
    assert str(info.value).startswith(f"{default_what}: 'nope'")

    with pytest.raises(InvalidHash) as info:
        parse(None, what="parentHash")
    assert info.value.what == "parentHash"
    assert "parentHash" in str(info.value)


def test_hash_errors_are_guard_and_value_errors() -> None:
    with pytest.raises(GuardError):
        parse_tx_hash(None)
    with pytest.raises(ValueError):
        parse_block_hash("0x00")


def test_address_good_and_case_normalised() -> None:
    assert parse_address(ADDRESS) == ADDRESS
    assert parse_address(ADDRESS.upper()) == ADDRESS
    # An EIP-55 checksummed spelling is accepted and lower-cased.
    checksummed = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
    assert parse_address(checksummed) == checksummed.lower()


@pytest.mark.parametrize("value", BAD_ADDRESSES, ids=repr)
def test_address_bad_is_refused(value: object) -> None:
    with pytest.raises(InvalidAddress) as info:
        parse_address(value, what="from")
    assert info.value.what == "from"
    assert info.value.value == value
    assert isinstance(info.value, GuardError)
    assert isinstance(info.value, ValueError)


def test_address_default_field_name() -> None:
    with pytest.raises(InvalidAddress, match=r"^address: None "):
        parse_address(None)
