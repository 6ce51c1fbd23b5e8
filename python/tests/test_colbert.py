"""ColBERT checkpoints on the BERT engines (``_backends/colbert.py``): tiny random checkpoints written in
PyLate's and colbert-ai's layouts (``colbert_checkpoints.py``), loaded by ``load_backend`` on the numpy,
ONNX and OpenVINO engines, and compared to the vectors PyLate and colbert-ai computed for the same
checkpoints (``data/colbert-reference.json``, recorded by ``data/colbert_reference.py``): query and
document mode, query expansion with and without attention to the expansion tokens, the documents'
skiplist, the markers, truncation and MaxSim ranking."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import densewire
from colbert_checkpoints import CASES, DOCUMENTS, PUNCTUATION, QUERIES, write_case
from densewire._backends import load_backend
from densewire._backends.colbert import read_colbert
from densewire._backends.hub import HUB_FILES
from tiny_bert import write_tiny_model

REFERENCE = json.loads((Path(__file__).parent / "data" / "colbert-reference.json").read_text(encoding="utf-8"))
TOLERANCE = 1e-5  # fp32 against torch fp32, per coordinate of the normalized vectors
ENGINES = ("numpy", "onnx", "openvino")


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("colbert")
    return {name: write_case(root / name, name) for name in CASES}


@pytest.fixture(scope="module")
def backends(folders, tmp_path_factory):
    cache = tmp_path_factory.mktemp("graphs")
    made = {}

    def get(case: str, engine: str):
        if (case, engine) not in made:
            options = {"cache": str(cache)} if engine != "numpy" else {}
            made[case, engine] = load_backend(str(folders[case]), engine=engine, precision="fp32", **options)
        return made[case, engine]

    return get


def _reference(case: str) -> tuple[dict, str]:
    """The case's recorded vectors: colbert-ai's own for its checkpoint, PyLate's for PyLate's."""
    rec = REFERENCE["cases"][case]
    if rec["layout"] == "colbert-ai":
        assert "colbert-ai" in rec, f"colbert-ai's reference was not recorded: {rec.get('colbert-ai-error')}"
        return rec["colbert-ai"], "colbert-ai"
    return rec["pylate"], "pylate"


def _close(got: tuple[np.ndarray, np.ndarray], expected: list) -> None:
    rows, lengths = got
    assert lengths.tolist() == [len(m) for m in expected]
    want = np.array([r for m in expected for r in m], dtype=np.float64)
    assert rows.dtype == np.float32 and rows.shape == want.shape
    assert np.abs(rows - want).max() <= TOLERANCE


def test_generated_checkpoints_are_the_recorded_ones(folders) -> None:
    """The generator writes the bytes the reference vectors were computed from."""
    for name, folder in folders.items():
        digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
        assert digest == REFERENCE["cases"][name]["weights_sha256"], name


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", list(CASES))
def test_matches_reference(backends, case, engine) -> None:
    backend = backends(case, engine)
    head = backend.colbert
    ref, _ = _reference(case)
    _close(head.embed(QUERIES, is_query=True), ref["queries"])
    _close(head.embed(DOCUMENTS, is_query=False), ref["documents"])


@pytest.mark.parametrize("case", list(CASES))
def test_query_ids_are_the_libraries(backends, case) -> None:
    """Markers and expansion as PyLate's tokenize / colbert-ai's QueryTokenizer: the same ids."""
    ref, _ = _reference(case)
    head = backends(case, "numpy").colbert
    seqs, _ = head.sequences(QUERIES, is_query=True)
    expected = ref["query_ids"]
    if CASES[case][1].get("do_query_expansion") is False:  # PyLate pads the batch to its longest (attention 0)
        assert [row[len(s):] for row, s in zip(expected, seqs)] == [[head.mask_id] * (len(row) - len(s))
                                                                    for row, s in zip(expected, seqs)]
        expected = [row[:len(s)] for row, s in zip(expected, seqs)]
        assert len({len(s) for s in seqs}) > 1  # the case shows it: queries of different lengths
    assert seqs == expected


def test_modes_markers_and_expansion(backends) -> None:
    head = backends("pylate", "numpy").colbert
    tok = head.encoder._counter
    q, keys = head.sequences(["red house"], is_query=True)
    assert q[0][:2] == [tok.token_to_id("[CLS]"), tok.token_to_id("[Q] ")]
    assert len(q[0]) == 12 and q[0][keys[0]:] == [tok.token_to_id("[MASK]")] * (12 - keys[0])
    assert keys[0] == 5  # [CLS] [Q] red house [SEP]: the mask tokens are not attended to
    d, _ = head.sequences(["red house"], is_query=False)
    assert d[0] == [tok.token_to_id(t) for t in ("[CLS]", "[D] ", "red", "house", "[SEP]")]
    rows, lengths = head.embed(["red house"], is_query=True)
    assert lengths.tolist() == [12] and np.allclose(np.linalg.norm(rows, axis=1), 1, atol=1e-6)
    no_expansion = backends("pylate-no-expansion", "numpy").colbert
    assert no_expansion.embed(["red house"], is_query=True)[1].tolist() == [5]
    # attending to the expansion tokens changes every query vector, not only the masks'
    attend = backends("pylate-attend-expansion", "numpy").colbert
    assert np.abs(attend.embed(["red house"], True)[0][:5] - rows[:5]).max() > 1e-3
    colbert_ai = backends("colbert-ai", "numpy").colbert
    q, keys = colbert_ai.sequences(["red house"], is_query=True)
    tok = colbert_ai.encoder._counter
    assert q[0][:2] == [tok.token_to_id("[CLS]"), tok.token_to_id("[unused0]")] and len(q[0]) == 10


def test_skiplist_drops_punctuation_from_documents_only(backends) -> None:
    head = backends("pylate", "numpy").colbert
    text = "A cat, a dog; a river!"
    tokens = head.count_tokens([text], is_query=False)[0]
    _, lengths = head.embed([text], is_query=False)
    assert lengths.tolist() == [tokens - 3]  # , ; ! dropped
    assert set(PUNCTUATION) <= set(head.cfg.skiplist_words)
    _, qlengths = backends("pylate-no-expansion", "numpy").colbert.embed([text], is_query=True)
    assert qlengths.tolist() == [tokens]  # a query keeps them


def test_truncation_at_the_mode_length(backends) -> None:
    head = backends("colbert-ai", "numpy").colbert
    long = DOCUMENTS[-1]
    assert head.count_tokens([long], is_query=False)[0] > head.limit(False) == 14
    assert head.embed([long], is_query=False)[1].tolist() == [14]
    assert head.embed([long], is_query=True)[1].tolist() == [10]


@pytest.mark.parametrize("case", ["pylate", "colbert-ai"])
def test_maxsim_ranking_matches_reference(backends, case) -> None:
    ref, _ = _reference(case)
    head = backends(case, "onnx").colbert
    q = densewire.RaggedTensor.from_lengths(*head.embed(QUERIES, True))
    d = densewire.RaggedTensor.from_lengths(*head.embed(DOCUMENTS, False))
    got = densewire.maxsim(q, d)
    want = densewire.maxsim(densewire.RaggedTensor.from_arrays([np.array(m, np.float32) for m in ref["queries"]]),
                            densewire.RaggedTensor.from_arrays([np.array(m, np.float32) for m in ref["documents"]]))
    assert got.shape == (len(QUERIES), len(DOCUMENTS))
    assert np.abs(got - want).max() < 1e-4
    assert np.array_equal(np.argsort(-got, axis=1), np.argsort(-want, axis=1))


def test_pooled_vectors_are_refused_and_dimensions_are_the_projection(backends) -> None:
    backend = backends("pylate", "numpy")
    assert backend.dimensions == 16 and backend.colbert.cfg.info()["layout"] == "pylate"
    with pytest.raises(ValueError, match="multi-vector"):
        backend.embed(["x"])


@pytest.mark.parametrize("case", ["pylate", "colbert-ai"])
def test_loaded_by_hub_id_from_the_files_hub_fetches(case, folders, tmp_path, monkeypatch) -> None:
    """``--model org/name``: only the files HUB_FILES lets snapshot_download fetch (fnmatch, as
    huggingface_hub's allow_patterns) are in the cache snapshot, and the model loads from them, the same."""
    snapshot = tmp_path / "hub" / ("models--tiny-org--" + case) / "snapshots" / ("0" * 40)
    for f in folders[case].rglob("*"):
        rel = f.relative_to(folders[case]).as_posix()
        if f.is_file() and any(fnmatch.fnmatch(rel, p) for p in HUB_FILES):
            (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, snapshot / rel)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backend = load_backend(f"tiny-org/{case}", engine="numpy", precision="fp32")
    assert backend.name == f"tiny-org/{case}"
    ref, _ = _reference(case)
    _close(backend.colbert.embed(QUERIES, is_query=True), ref["queries"])
    _close(backend.colbert.embed(DOCUMENTS, is_query=False), ref["documents"])


def test_plain_models_are_not_colbert(tmp_path) -> None:
    folder = write_tiny_model(tmp_path / "plain")
    assert read_colbert(folder) is None
    assert not hasattr(load_backend(str(folder), engine="numpy"), "colbert")


def test_unsupported_layout_parts_are_named(tmp_path) -> None:
    folder = write_case(tmp_path / "m", "pylate")
    cfg = json.loads((folder / "1_Dense" / "config.json").read_text())
    (folder / "1_Dense" / "config.json").write_text(json.dumps({**cfg, "activation_function": "torch.nn.Tanh"}))
    with pytest.raises(ValueError, match="activation_function 'torch.nn.Tanh'"):
        read_colbert(folder)
    folder = write_case(tmp_path / "c", "colbert-ai")
    meta = json.loads((folder / "artifact.metadata").read_text())
    (folder / "artifact.metadata").write_text(json.dumps({**meta, "dim": 128}))
    with pytest.raises(ValueError, match="dim 128"):
        read_colbert(folder)
