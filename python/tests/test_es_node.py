"""The session's Elasticsearch node (scripts/elasticsearch.sh) is the real 9.5.3 the ES tests need."""

from __future__ import annotations

import httpx


def test_the_session_node_is_a_single_node_9_5_with_every_primary_assigned(es_node):
    # Not "green": the other tests' indices keep ES's default of one replica, which a single node never
    # assigns (yellow). Red (a primary unassigned) is what would break the tests that write.
    health = httpx.get(f"{es_node.url}/_cluster/health", timeout=30).json()
    assert health["status"] in ("green", "yellow") and health["number_of_nodes"] == 1
    assert health["unassigned_primary_shards"] == 0
    nodes = httpx.get(f"{es_node.url}/_nodes/_local", timeout=30).json()["nodes"]
    (node,) = nodes.values()
    assert node["version"] == "9.5.3"
    assert node["settings"]["http"]["port"] == es_node.url.rsplit(":", 1)[1]
