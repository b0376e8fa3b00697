"""The WAL one database's transactions wrote, from ``pg_waldump`` output on stdin.

WAL is per server, and other databases' work lands in the same range; this counts the
records of every transaction that touched a relation of the given database (its commit
record included), plus that database's records written outside a transaction (pruning,
hint-bit page images), and reports how much of it was full-page images. Used to measure
the WAL a workflow writes (docs/scale-out.md):

    start=$(psql -Atc "SELECT pg_current_wal_insert_lsn()")
    DATABASE_URL=... python bench/profile_hot_path.py --workflows 200
    end=$(psql -Atc "SELECT pg_current_wal_insert_lsn()")
    pg_waldump -p "$PGDATA/pg_wal" -s "$start" -e "$end" \\
        | python bench/wal_by_database.py --database-oid <oid> --per 205
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict

RECORD = re.compile(r"rmgr: (\S+)\s+len \(rec/tot\):\s*\d+/\s*(\d+), tx:\s*(\d+),")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-oid", type=int, required=True)
    parser.add_argument("--per", type=int, default=1, help="divide the totals by this (e.g. workflows run)")
    args = parser.parse_args()
    marker = f"/{args.database_oid}/"
    by_transaction: dict[int, int] = defaultdict(int)
    page_images: dict[int, int] = defaultdict(int)
    ours: set[int] = set()
    outside = outside_images = everything = 0
    for line in sys.stdin:
        match = RECORD.search(line)
        if match is None:
            continue
        size, xid = int(match[2]), int(match[3])
        everything += size
        mine = f"rel 1663{marker}" in line
        image = size if "FPW" in line else 0
        if xid:
            by_transaction[xid] += size
            page_images[xid] += image
            if mine:
                ours.add(xid)
        elif mine:
            outside += size
            outside_images += image
    written = sum(by_transaction[x] for x in ours) + outside
    images = sum(page_images[x] for x in ours) + outside_images
    print(f"WAL in range: {everything} bytes; this database's: {written} bytes in {len(ours)} transactions")
    per = args.per
    print(f"per {per}: {written / per:.0f} bytes, of which full-page images {images / per:.0f}")


if __name__ == "__main__":
    main()
