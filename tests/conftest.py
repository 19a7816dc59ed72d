"""Fixtures shared by the whole test suite.

``s3``: an S3 server (moto) on 127.0.0.1 for the duration of the session, for
tests of object-store inputs and outputs.  Needs ``moto[server]`` and ``s3fs``
(the ``test`` extra).  ``chunk_reads``: the chunk keys local Zarr stores are
asked for during a test, counted.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest


@dataclasses.dataclass
class S3Server:
    """A running moto S3 server with one empty bucket.

    Attributes
    ----------
    endpoint : str
        ``http://127.0.0.1:<port>``.
    bucket : str
        A bucket created for the session.
    storage_options : dict
        fsspec/s3fs options reaching the server (fake credentials, endpoint,
        region); pass them as ``storage_options=`` to distsketch's I/O.
    """

    endpoint: str
    bucket: str
    storage_options: dict

    def url(self, prefix: str | None = None) -> str:
        """``s3://<bucket>/<prefix>``; a fresh unique prefix when none is given."""
        return f"s3://{self.bucket}/{prefix or uuid.uuid4().hex[:12]}"

    def cli_options(self) -> list[str]:
        """The same options as ``--storage-option KEY=VALUE`` arguments of the CLI."""
        so = self.storage_options
        return ["--storage-option", f"key={so['key']}", "--storage-option",
                f"secret={so['secret']}", "--storage-option",
                f"client_kwargs.endpoint_url={self.endpoint}", "--storage-option",
                f"client_kwargs.region_name={so['client_kwargs']['region_name']}"]

    @property
    def fs(self) -> Any:
        """A synchronous s3fs filesystem on the server (listing caches off)."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False,
                                 **self.storage_options)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """A moto S3 server on 127.0.0.1 (a free port) with an empty bucket, for the session.

    Yields an :class:`S3Server`: ``s3.url("x.zarr")`` is ``s3://<bucket>/x.zarr``
    (``s3.url()`` a fresh unique prefix), ``s3.storage_options`` the fsspec
    options that reach it, ``s3.cli_options()`` the same as ``--storage-option``
    arguments, ``s3.fs`` an s3fs filesystem for inspecting what was written.
    Reachable from subprocesses and local Dask workers too.
    """
    pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    s = S3Server(endpoint=endpoint, bucket="distsketch-test", storage_options=options)
    try:
        import boto3  # installed with moto

        boto3.client("s3", aws_access_key_id="testing", aws_secret_access_key="testing",
                     endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=s.bucket)
        yield s
    finally:
        server.stop()


@pytest.fixture
def chunk_reads(monkeypatch) -> Counter:
    """Chunk reads of local Zarr stores (key -> count), counted where zarr fetches a key;
    ``clear()`` it between the runs a test compares."""
    from zarr.storage import LocalStore

    reads: Counter = Counter()
    real = LocalStore.get

    async def counted(self, key, *args, **kwargs):
        if "/c/" in key:
            reads[key] += 1
        return await real(self, key, *args, **kwargs)

    monkeypatch.setattr(LocalStore, "get", counted)
    return reads
