"""A server stopped by SIGTERM leaves nothing behind (issue 33 item 7): the table build processes' queues
(a ProcessPoolExecutor's semaphores) are closed before the process exits. uvicorn re-raises SIGTERM once
shut down, so no finalizer runs after the lifespan: what the lifespan did not close, multiprocessing's
resource_tracker reports as "There appear to be N leaked semaphore objects"."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from server_support import SRC, ServerProcess

LEAK = "resource_tracker"


def test_build_process_shutdown_releases_its_semaphores() -> None:
    """lanes._shutdown on a busy machine (the executor's manager thread slowed: the fault injected), then
    death by SIGTERM at once, as uvicorn exits: every semaphore the executor made is released first, and
    the tracker has nothing to report."""
    script = textwrap.dedent(f"""
        import signal, sys, time
        sys.path.insert(0, {str(SRC)!r})
        from concurrent.futures import process
        from multiprocessing import resource_tracker
        live = set()
        register, unregister = resource_tracker.register, resource_tracker.unregister
        def counting_register(name, rtype):
            live.add(name) if rtype == "semaphore" else None
            register(name, rtype)
        def counting_unregister(name, rtype):
            live.discard(name)
            unregister(name, rtype)
        resource_tracker.register, resource_tracker.unregister = counting_register, counting_unregister
        slow = process._ExecutorManagerThread.join_executor_internals
        def slowed(self):
            time.sleep(0.5)
            slow(self)
        process._ExecutorManagerThread.join_executor_internals = slowed
        from densewire._server.tables import lanes
        if __name__ == "__main__":
            executor = lanes.process_pool("load")
            assert executor.submit(pow, 2, 10).result() == 1024
            made = len(live)
            lanes._shutdown(executor)
            del executor
            print(made, len(live), flush=True)
            signal.raise_signal(signal.SIGTERM)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -15, proc.stderr
    made, live = map(int, proc.stdout.split())
    assert made == 5 and live == 0  # a call queue's 3 semaphores and a result queue's 2, all released
    assert LEAK not in proc.stderr, proc.stderr


def test_sigterm_stopped_server_prints_no_resource_tracker_warning(tmp_path) -> None:
    server = ServerProcess("--model", "hash:8", "--accept-any-model", "--table", "t=demo:rows=10",
                           "--table-compression", "fast", tmp=tmp_path).start()
    try:
        assert server.proc is not None
        time.sleep(1.0)  # the table built by the build process
        rc = server.stop()
        assert rc == -15
        time.sleep(1.5)
        log = server.log_text()
        assert "Application shutdown complete" in log
        assert LEAK not in log, log[-2000:]
    finally:
        server.stop()
