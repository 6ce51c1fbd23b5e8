"""The demo table (issue 4): deterministic, 67,627 map points, realistic and unordered."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import densewire
from densewire._tables import CITIES, DEMO_ROWS, DEMO_SEED, to_float32


@pytest.fixture(scope="module")
def points():
    return densewire.demo_table()


def test_shape_and_schema(points) -> None:
    assert points.name == "points" and points.rows == DEMO_ROWS == 67627
    assert densewire.columns_header(points) == "uuid=uuid,status=int32,longitude=float64,latitude=float64"


def test_deterministic_for_a_seed(points) -> None:
    again = densewire.demo_table()
    assert again == points
    digest = hashlib.sha256(densewire.encode_table(points, "protobuf")).hexdigest()
    assert hashlib.sha256(densewire.encode_table(again, "protobuf")).hexdigest() == digest
    other = densewire.demo_table(seed=DEMO_SEED + 1)
    assert other != points and not np.array_equal(other.column("latitude").values, points.column("latitude").values)
    small = densewire.demo_table(rows=10)
    assert small.rows == 10 and small == densewire.demo_table(rows=10)


def test_uuids_are_version_4_variant_10_and_unique(points) -> None:
    u = points.column("uuid").values
    assert u.shape == (DEMO_ROWS, 16)
    assert (u[:, 6] >> 4 == 4).all()
    assert (u[:, 8] >> 6 == 0b10).all()
    assert len({bytes(r) for r in u}) == DEMO_ROWS


def test_status_is_zero_or_one_with_both_present(points) -> None:
    s = points.column("status").values
    assert s.dtype == np.int32 and set(np.unique(s).tolist()) == {0, 1}
    assert 0.5 < s.mean() < 0.75


def test_coordinates_are_valid_full_precision_and_near_cities(points) -> None:
    lon = points.column("longitude").values
    lat = points.column("latitude").values
    assert lon.dtype == np.float64 and lat.dtype == np.float64
    assert (-180 <= lon).all() and (lon <= 180).all() and (-90 <= lat).all() and (lat <= 90).all()
    # full double precision: not representable as float32
    assert (to_float32(lon).astype(np.float64) != lon).mean() > 0.99
    # every point is within ~6 sigma (at most 27 km * 6) of some city; between 50 and 120 centres are used
    clat = np.radians([c[1] for c in CITIES])
    clon = np.radians([c[2] for c in CITIES])
    plat, plon = np.radians(lat[:, None]), np.radians(lon[:, None])
    cosd = np.sin(plat) * np.sin(clat) + np.cos(plat) * np.cos(clat) * np.cos(plon - clon)
    km = 6371 * np.arccos(np.clip(cosd, -1, 1))
    nearest = km.min(axis=1)
    assert nearest.max() < 200 and np.median(nearest) > 1
    assert 50 <= len(CITIES) <= 120 and len(np.unique(km.argmin(axis=1))) > 50
    # population-weighted: Tokyo gets more points than Reykjavik by far
    counts = np.bincount(km.argmin(axis=1), minlength=len(CITIES))
    names = [c[0] for c in CITIES]
    assert counts[names.index("Tokyo")] > 20 * counts[names.index("Reykjavik")]


def test_rows_are_not_grouped_by_city(points) -> None:
    lat = points.column("latitude").values
    # consecutive rows are as far apart as random pairs: no ordering gift to compressors
    consecutive = np.abs(np.diff(lat)).mean()
    shuffled = np.abs(np.diff(np.random.default_rng(0).permutation(lat))).mean()
    assert 0.9 < consecutive / shuffled < 1.1


def test_float32_variant_is_the_rounding_of_the_float64_one(points) -> None:
    f32 = densewire.demo_table(coordinates="float32")
    assert f32.name == "points_f32"
    assert densewire.columns_header(f32) == "uuid=uuid,status=int32,longitude=float32,latitude=float32"
    for name in ("longitude", "latitude"):
        assert np.array_equal(f32.column(name).values.view("<u4"), points.column(name).values.astype(np.float32).view("<u4"))
    for name in ("uuid", "status"):
        assert f32.column(name) == points.column(name)
    assert densewire.demo_table(coordinates="float32", name="x").name == "x"
    with pytest.raises(ValueError):
        densewire.demo_table(coordinates="float16")


@pytest.mark.parametrize("coordinates", ["float64", "float32"])
def test_demo_encodes_and_decodes_in_every_format(coordinates) -> None:
    t = densewire.demo_table(coordinates=coordinates)
    for fmt in densewire.TABLE_FORMATS:
        body = densewire.encode_table(t, fmt)
        assert densewire.decode_table(body, fmt, columns=densewire.columns_header(t), name=t.name) == t, fmt
