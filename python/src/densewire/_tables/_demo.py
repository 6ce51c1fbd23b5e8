"""The demo table of issue 4: an interactive map's points, ``{uuid, status, longitude, latitude}``.

Deterministic for a seed and a numpy version (``numpy.random.Generator(PCG64)``): every point picks
one of about a hundred real population centres, weighted by the metropolitan population, and lies
at a Gaussian distance of a few km (small towns) to tens of km (megacities) from it. The draws are
independent, so the rows come in random order (no ordering gift to compressors). Coordinates are
float64 with every bit of precision the Gaussian gives; ``coordinates="float32"`` rounds the same
values by SPEC.md section 3.3.
"""

from __future__ import annotations

import numpy as np

from ._model import Column, Table, to_float32

__all__ = ["demo_table", "DEMO_SEED", "DEMO_ROWS", "CITIES"]

DEMO_SEED = 67627
DEMO_ROWS = 67627

#: (name, latitude, longitude, metropolitan population in millions), approximate.
CITIES: tuple[tuple[str, float, float, float], ...] = (
    ("Tokyo", 35.6895, 139.6917, 37.4), ("Delhi", 28.6139, 77.2090, 32.9), ("Shanghai", 31.2304, 121.4737, 29.2),
    ("Dhaka", 23.8103, 90.4125, 23.2), ("Sao Paulo", -23.5505, -46.6333, 22.6), ("Cairo", 30.0444, 31.2357, 22.2),
    ("Mexico City", 19.4326, -99.1332, 22.3), ("Beijing", 39.9042, 116.4074, 21.8), ("Mumbai", 19.0760, 72.8777, 21.3),
    ("New York", 40.7128, -74.0060, 18.9), ("Osaka", 34.6937, 135.5023, 19.0), ("Chongqing", 29.5630, 106.5516, 17.3),
    ("Karachi", 24.8607, 67.0011, 17.2), ("Kinshasa", -4.4419, 15.2663, 16.3), ("Lagos", 6.5244, 3.3792, 15.9),
    ("Istanbul", 41.0082, 28.9784, 15.8), ("Buenos Aires", -34.6037, -58.3816, 15.5), ("Kolkata", 22.5726, 88.3639, 15.3),
    ("Manila", 14.5995, 120.9842, 14.7), ("Guangzhou", 23.1291, 113.2644, 14.3), ("Tianjin", 39.3434, 117.3616, 14.0),
    ("Lahore", 31.5204, 74.3587, 13.9), ("Bangalore", 12.9716, 77.5946, 13.6), ("Rio de Janeiro", -22.9068, -43.1729, 13.7),
    ("Shenzhen", 22.5431, 114.0579, 13.1), ("Moscow", 55.7558, 37.6173, 12.7), ("Los Angeles", 34.0522, -118.2437, 12.5),
    ("Chennai", 13.0827, 80.2707, 11.8), ("Bogota", 4.7110, -74.0721, 11.5), ("Jakarta", -6.2088, 106.8456, 11.2),
    ("Lima", -12.0464, -77.0428, 11.2), ("Paris", 48.8566, 2.3522, 11.2), ("Bangkok", 13.7563, 100.5018, 11.1),
    ("Hyderabad", 17.3850, 78.4867, 10.8), ("Seoul", 37.5665, 126.9780, 10.0), ("London", 51.5074, -0.1278, 9.6),
    ("Nagoya", 35.1815, 136.9066, 9.5), ("Chengdu", 30.5728, 104.0668, 9.5), ("Tehran", 35.6892, 51.3890, 9.5),
    ("Ho Chi Minh City", 10.8231, 106.6297, 9.3), ("Luanda", -8.8390, 13.2894, 9.0), ("Chicago", 41.8781, -87.6298, 8.9),
    ("Wuhan", 30.5928, 114.3055, 8.6), ("Ahmedabad", 23.0225, 72.5714, 8.6), ("Kuala Lumpur", 3.1390, 101.6869, 8.6),
    ("Xi'an", 34.3416, 108.9398, 8.5), ("Surat", 21.1702, 72.8311, 7.8), ("Hong Kong", 22.3193, 114.1694, 7.6),
    ("Hangzhou", 30.2741, 120.1551, 7.6), ("Dallas", 32.7767, -96.7970, 7.6), ("Riyadh", 24.7136, 46.6753, 7.5),
    ("Baghdad", 33.3152, 44.3661, 7.5), ("Dar es Salaam", -6.7924, 39.2083, 7.4), ("Shenyang", 41.8057, 123.4315, 7.4),
    ("Houston", 29.7604, -95.3698, 7.1), ("Pune", 18.5204, 73.8567, 7.0), ("Santiago", -33.4489, -70.6693, 6.9),
    ("Madrid", 40.4168, -3.7038, 6.7), ("Suzhou", 31.2989, 120.5853, 6.7), ("Harbin", 45.8038, 126.5350, 6.5),
    ("Toronto", 43.6532, -79.3832, 6.3), ("Washington", 38.9072, -77.0369, 6.3), ("Philadelphia", 39.9526, -75.1652, 6.2),
    ("Belo Horizonte", -19.9167, -43.9345, 6.2), ("Khartoum", 15.5007, 32.5599, 6.2), ("Qingdao", 36.0671, 120.3826, 6.2),
    ("Miami", 25.7617, -80.1918, 6.1), ("Atlanta", 33.7490, -84.3880, 6.1), ("Johannesburg", -26.2041, 28.0473, 6.1),
    ("Singapore", 1.3521, 103.8198, 6.0), ("Barcelona", 41.3851, 2.1734, 5.6), ("Dalian", 38.9140, 121.6147, 5.6),
    ("Yangon", 16.8409, 96.1735, 5.6), ("Fukuoka", 33.5904, 130.4017, 5.5), ("Saint Petersburg", 59.9311, 30.3609, 5.5),
    ("Abidjan", 5.3600, -4.0083, 5.5), ("Alexandria", 31.2001, 29.9187, 5.4), ("Ankara", 39.9334, 32.8597, 5.3),
    ("Guadalajara", 20.6597, -103.3496, 5.3), ("Sydney", -33.8688, 151.2093, 5.3), ("Jinan", 36.6512, 117.1201, 5.2),
    ("Addis Ababa", 9.0300, 38.7400, 5.2), ("Nairobi", -1.2921, 36.8219, 5.1), ("Melbourne", -37.8136, 144.9631, 5.1),
    ("Monterrey", 25.6866, -100.3161, 5.1), ("Boston", 42.3601, -71.0589, 4.9), ("Cape Town", -33.9249, 18.4241, 4.8),
    ("San Francisco", 37.7749, -122.4194, 4.7), ("Berlin", 52.5200, 13.4050, 4.6), ("Rome", 41.9028, 12.4964, 4.3),
    ("Montreal", 45.5017, -73.5673, 4.3), ("Casablanca", 33.5731, -7.5898, 3.8), ("Athens", 37.9838, 23.7275, 3.2),
    ("Warsaw", 52.2297, 21.0122, 3.1), ("Lisbon", 38.7223, -9.1393, 3.0), ("Kyiv", 50.4501, 30.5234, 3.0),
    ("Accra", 5.6037, -0.1870, 2.6), ("Amsterdam", 52.3676, 4.9041, 2.5), ("Perth", -31.9505, 115.8605, 2.1),
    ("Havana", 23.1136, -82.3666, 2.1), ("Vienna", 48.2082, 16.3738, 2.0), ("Quito", -0.1807, -78.4678, 2.0),
    ("Auckland", -36.8485, 174.7633, 1.7), ("Stockholm", 59.3293, 18.0686, 1.6), ("Ulaanbaatar", 47.8864, 106.9057, 1.6),
    ("Honolulu", 21.3069, -157.8583, 1.0), ("Anchorage", 61.2181, -149.9003, 0.4), ("Reykjavik", 64.1466, -21.9426, 0.24),
)

_KM_PER_DEG_LAT = 110.574
_KM_PER_DEG_LON = 111.320  # at the equator; times cos(latitude)
_STATUS_ONE = 0.62  # share of status 1


def demo_table(*, rows: int = DEMO_ROWS, seed: int = DEMO_SEED, coordinates: str = "float64",
               name: str | None = None) -> Table:
    """The map's points: ``uuid`` (v4, from the seeded generator), ``status`` (int32 0/1),
    ``longitude``, ``latitude`` (float64, or float32 by section 3.3 with ``coordinates="float32"``).
    The name is ``points`` (``points_f32`` for float32) unless given."""
    if coordinates not in ("float64", "float32"):
        raise ValueError(f"coordinates must be 'float64' or 'float32', got {coordinates!r}")
    if rows < 0:
        raise ValueError(f"rows must be >= 0, got {rows}")
    rng = np.random.Generator(np.random.PCG64(seed))
    lat0 = np.array([c[1] for c in CITIES])
    lon0 = np.array([c[2] for c in CITIES])
    pop = np.array([c[3] for c in CITIES])
    city = rng.choice(len(CITIES), size=rows, p=pop / pop.sum())
    sigma_km = 3.0 + 4.0 * np.sqrt(pop[city])  # ~5 km (Reykjavik) to ~27 km (Tokyo)
    offset = rng.standard_normal((rows, 2)) * sigma_km[:, None]
    latitude = np.clip(lat0[city] + offset[:, 0] / _KM_PER_DEG_LAT, -90.0, 90.0)
    cos_lat = np.maximum(np.cos(np.radians(lat0[city])), 0.01)
    longitude = np.clip(lon0[city] + offset[:, 1] / (_KM_PER_DEG_LON * cos_lat), -180.0, 180.0)
    uuids = np.frombuffer(rng.bytes(16 * rows), np.uint8).reshape(rows, 16).copy()
    uuids[:, 6] = (uuids[:, 6] & 0x0F) | 0x40  # version 4
    uuids[:, 8] = (uuids[:, 8] & 0x3F) | 0x80  # variant 10 (RFC 9562)
    status = (rng.random(rows) < _STATUS_ONE).astype("<i4")
    if coordinates == "float32":
        lon_col = Column("longitude", "float32", to_float32(longitude))
        lat_col = Column("latitude", "float32", to_float32(latitude))
    else:
        lon_col = Column("longitude", "float64", longitude)
        lat_col = Column("latitude", "float64", latitude)
    default = "points" if coordinates == "float64" else "points_f32"
    return Table(default if name is None else name,
                 [Column("uuid", "uuid", uuids), Column("status", "int32", status), lon_col, lat_col], rows)
