"""The vector stores densewire writes into, one module per store family (the wire and catalog of each:
what the batch sinks, :mod:`densewire.ray`, :mod:`densewire.spark` and ``densewire ingest`` share)."""
