"""What every table shares: the one ``MetaData`` and the column types used across tables."""

from sqlalchemy import BigInteger, Integer, MetaData, String

metadata = MetaData()
"""Every table of the store (watcher/store/schema.py and the modules it imports)."""

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL wants BIGINT.
AutoId = BigInteger().with_variant(Integer(), "sqlite")
Hash = String(66)
