"""The implementation of ``densewire serve``; its public surface is :mod:`densewire.server`.

Modules: ``cli`` (flags, uvicorn) and ``config`` (settings), light enough for ``densewire --help``;
``app`` (the Starlette app, the ``/v1/embeddings`` pipeline), ``request`` (parsing),
``negotiation`` (Accept, Accept-Encoding), ``compression`` (request bodies), ``embedder`` with
``batcher`` and ``cache`` (the model call), ``responses`` (rendering), ``metrics``, ``openapi``,
``logs``; ``tables/`` (SPEC.md 15.9). This package's ``__init__`` imports none of them.
"""
