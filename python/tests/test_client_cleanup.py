"""Clients clean up after themselves (issue 27 item 5): a ``densewire.Client`` used without ``with`` or
``close()``, and an ``AsyncClient`` whose ``asyncio.run`` loop ends, leave no open aiohttp session, so
nothing is printed at exit. Each script runs in a fresh interpreter with every warning an error
(``-W error``, ``PYTHONWARNINGS=error``; not ``-X dev``, whose asyncio debug mode logs slow callbacks on
a busy machine): its stderr must be empty, its exit code 0 and its stdout exactly what it printed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from server_support import ServerProcess


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--model", "hash:48") as s:
        yield s


SCRIPTS = {
    "sync_one_liner": """
        print(densewire.Client(URL).embed(["a b c"]).shape)
    """,
    "sync_kept_until_exit": """
        client = densewire.Client(URL)
        print(client.embed(["a", "b"]).shape, len(client.models()))
    """,
    "sync_in_threads": """
        import threading
        out = []
        threads = [threading.Thread(target=lambda: out.append(densewire.Client(URL).embed(["x"]).shape)) for _ in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(out)
    """,
    "sync_closed_twice": """
        client = densewire.Client(URL)
        print(client.embed(["a"]).shape)
        client.close()
        client.close()
    """,
    "tables_client": """
        print(type(densewire.TablesClient(URL).list_tables()).__name__)
    """,
    "async_loop_ends": """
        import asyncio
        async def main():
            client = densewire.AsyncClient(URL)
            print((await client.embed(["a b c"])).shape)
        asyncio.run(main())
    """,
    "async_kept_across_two_loops": """
        import asyncio
        client = densewire.AsyncClient(URL)
        async def main():
            print((await client.embed(["a"])).shape)
        asyncio.run(main())
        asyncio.run(main())  # the first loop closed its session; the second makes one of its own
    """,
    "async_tables_loop_ends": """
        import asyncio
        async def main():
            print(type(await densewire.AsyncTablesClient(URL).list_tables()).__name__)
        asyncio.run(main())
    """,
}

EXPECTED = {
    "sync_one_liner": "(1, 48)\n",
    "sync_kept_until_exit": "(2, 48) 1\n",
    "sync_in_threads": "[(1, 48), (1, 48), (1, 48), (1, 48)]\n",
    "sync_closed_twice": "(1, 48)\n",
    "tables_client": "list\n",
    "async_loop_ends": "(1, 48)\n",
    "async_kept_across_two_loops": "(1, 48)\n(1, 48)\n",
    "async_tables_loop_ends": "list\n",
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_client_not_closed_leaves_nothing_open(server, name: str) -> None:
    code = f"import densewire\nURL = {server.url!r}\n" + textwrap.dedent(SCRIPTS[name])
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    run = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.stderr == "" and run.returncode == 0, f"exit {run.returncode}, stderr:\n{run.stderr}"
    assert run.stdout == EXPECTED[name]
