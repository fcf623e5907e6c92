"""`crucible fetch --uri URI [--dest DIR]`: copy a run record from its destination into a directory.

The record's keys come from the destination, so they are hostile input: each is written through
a file store rooted at DIR, which refuses a key that climbs out of it and never follows a link.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from crucible_run_records.destination import RecordAddress, RecordStore


@click.command("fetch")
@click.option(
    "--uri", required=True, help="The record folder: s3://bucket/prefix/<run-id> or file:///abs/path."
)
@click.option(
    "--dest",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where to put the record's files (default: ./<the record folder's name>).",
)
def command(uri: str, dest: Path | None) -> None:
    """Read a run record back: every file under URI is copied into DEST, keeping its layout.

    S3 credentials and endpoint come from the standard AWS environment (AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, ...). Exit codes: 0 fetched; 10 URI is not
    s3://bucket[/prefix] or file:///abs/path; 15 the destination refused or holds no record.
    """
    from crucible_run_records.destination import FileStore, parse_address

    address = parse_address(uri)
    target = (
        dest if dest is not None else Path.cwd() / (address.parts[-1] if address.parts else address.bucket)
    )
    count = fetch_record(address, FileStore(target.absolute()), dict(os.environ))
    click.echo(f"fetched {count} files from {address} into {target}")


def fetch_record(address: RecordAddress, into: RecordStore, env: dict[str, str]) -> int:
    """Copy every file of the record at `address` into the store `into`; how many were copied."""
    from crucible_run_records.destination import RecordStoreError, open_store

    try:
        source = open_store(address, env)
        keys = source.keys()
        if not keys:
            raise RecordStoreError(
                f"no run record at {address}", hint="check the address: it names the run's folder"
            )
        for key in keys:
            into.put(key, source.get(key))
    except RecordStoreError:
        raise
    except ValueError as exc:  # a hostile key: refused, nothing outside DEST written
        raise RecordStoreError(
            f"the record at {address} holds a key that is not a plain path: {exc}"
        ) from exc
    except Exception as exc:  # boto3's and the file system's failures, told as one line
        raise RecordStoreError(
            f"could not read the record at {address}: {type(exc).__name__}: {exc}"
        ) from exc
    return len(keys)
