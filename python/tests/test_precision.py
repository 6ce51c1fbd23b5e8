"""--precision and --engine auto (issue 26): the choice from a CPU's flags, on both kinds of CPU, and the
start-up errors for what a CPU or engine cannot run natively."""

from __future__ import annotations

from pathlib import Path

import pytest

from densewire._backends import OnnxBertBackend, OpenVinoBertBackend, load_backend, precision
from densewire._backends.precision import (
    PrecisionError, choose, cpu_features, cpu_flags, int8_reduce_range, merge_quantize, native_precision)

#: this project's development machine: AMD EPYC, AVX2 only (from its /proc/cpuinfo)
EPYC_AVX2 = ("fpu vme sse sse2 ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor "
             "bmi1 avx2 smep bmi2 erms adx smap clflushopt clwb sha_ni xsaveopt vaes vpclmulqdq rdpid fsrm").split()
#: an Intel Xeon 4th generation (Sapphire Rapids, AWS m7i): AMX and AVX-512 with BF16 and VNNI
XEON_AMX = EPYC_AVX2 + ("avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16 avx512_vnni avx512_fp16 "
                        "avx_vnni amx_bf16 amx_tile amx_int8").split()
#: an AMD Zen 4 (EPYC Genoa): AVX512_BF16 without AMX
ZEN4 = EPYC_AVX2 + "avx512f avx512bw avx512vl avx512_bf16 avx512_vnni".split()
ALL = ("onnx", "openvino", "numpy")


def test_cpu_flags_reads_the_first_processor(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 amx_bf16\n\n"
                    "processor\t: 1\nflags\t\t: fpu\n", "utf-8")
    assert cpu_flags(info) == ("fpu", "avx2", "amx_bf16")
    assert cpu_flags(tmp_path / "missing") == ()  # macOS, Windows: no file, fp32 everywhere
    assert native_precision(cpu_flags(tmp_path / "missing")) == "fp32"


def test_this_machine_is_read(tmp_path: Path) -> None:
    flags = cpu_flags()
    assert "avx2" in flags or not Path("/proc/cpuinfo").is_file() or "Features" in Path("/proc/cpuinfo").read_text()
    assert choose(flags=flags, installed=ALL).features == cpu_features(flags)


def test_avx2_keeps_onnx_fp32() -> None:
    """No regression where bf16 is absent: auto is today's ONNX fp32 engine."""
    c = choose("auto", "auto", EPYC_AVX2, installed=ALL)
    assert (c.engine, c.precision) == ("onnx", "fp32")
    assert c.features == ("avx2",)
    assert "no bf16 matrix unit" in c.reason
    assert choose(None, None, EPYC_AVX2, installed=ALL) == c
    assert choose("auto", "auto", EPYC_AVX2, installed=["numpy"]).engine == "numpy"  # no onnxruntime


@pytest.mark.parametrize("flags, decisive", [(XEON_AMX, "amx_bf16"), (ZEN4, "avx512_bf16")])
def test_bf16_cpus_get_openvino_bf16(flags: list[str], decisive: str) -> None:
    c = choose("auto", "auto", flags, installed=ALL)
    assert (c.engine, c.precision) == ("openvino", "bf16")
    assert decisive in c.features and "bf16 natively" in c.reason
    assert choose("openvino", "auto", flags, installed=ALL).precision == "bf16"
    assert choose("auto", "bf16", flags, installed=ALL).engine == "openvino"
    # an engine without bf16, named explicitly, runs fp32
    assert (choose("onnx", "auto", flags, installed=ALL).precision, choose("numpy", "auto", flags).precision) == (
        "fp32", "fp32")
    # openvino missing: the fp32 engine, said in the reason
    fallback = choose("auto", "auto", flags, installed=["onnx", "numpy"])
    assert (fallback.engine, fallback.precision) == ("onnx", "fp32") and "not installed" in fallback.reason
    # fp32 asked for on a bf16 CPU: ONNX Runtime, measured fastest for fp32
    assert (choose("auto", "fp32", flags, installed=ALL).engine) == "onnx"


def test_bf16_without_bf16_units_is_a_start_up_error() -> None:
    with pytest.raises(PrecisionError, match="neither amx_bf16 nor avx512_bf16.*avx2.*--precision auto"):
        choose("auto", "bf16", EPYC_AVX2, installed=ALL)
    with pytest.raises(PrecisionError, match="neither amx_bf16 nor avx512_bf16"):
        choose("openvino", "bf16", EPYC_AVX2, installed=ALL)
    for engine in ("onnx", "numpy"):
        with pytest.raises(PrecisionError, match=f"needs --engine openvino.*the {engine} engine"):
            choose(engine, "bf16", XEON_AMX, installed=ALL)


def test_int8_runs_on_onnx_only() -> None:
    for flags in (EPYC_AVX2, XEON_AMX):
        c = choose("auto", "int8", flags, installed=ALL)
        assert (c.engine, c.precision) == ("onnx", "int8")
    for engine in ("openvino", "numpy"):
        with pytest.raises(PrecisionError, match=f"int8 needs the onnx engine.*the {engine} engine has no int8"):
            choose(engine, "int8", XEON_AMX, installed=ALL)


def test_int8_reduce_range_only_without_vnni() -> None:
    assert int8_reduce_range(EPYC_AVX2) is True
    assert int8_reduce_range(XEON_AMX) is False and int8_reduce_range(ZEN4) is False
    assert int8_reduce_range(EPYC_AVX2 + ["avx_vnni"]) is False  # Alder Lake: VNNI on AVX2


def test_quantize_is_the_older_name_of_int8() -> None:
    assert merge_quantize("auto", "int8") == merge_quantize(None, "int8") == merge_quantize("int8", "int8") == "int8"
    assert merge_quantize("bf16", "none") == merge_quantize("bf16", None) == "bf16"
    for p in ("fp32", "bf16"):
        with pytest.raises(PrecisionError, match=f"--quantize int8 is the older name.*--precision {p}"):
            merge_quantize(p, "int8")


def test_bad_names_are_refused() -> None:
    with pytest.raises(PrecisionError, match="precision must be one of auto, fp32, bf16, int8, not 'fp16'"):
        choose("auto", "fp16", EPYC_AVX2)
    with pytest.raises(PrecisionError, match="engine must be one of auto, onnx, openvino, numpy, not 'torch'"):
        choose("torch", "auto", EPYC_AVX2)
    assert issubclass(PrecisionError, ValueError)


def test_load_backend_auto_on_this_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `densewire serve` loads with no flags: ONNX fp32 on an AVX2 CPU, OpenVINO bf16 on a bf16 one."""
    monkeypatch.setenv("DENSEWIRE_CACHE_DIR", str(tmp_path))
    b = load_backend("minilm", threads=1)
    if native_precision(cpu_flags()) == "bf16":
        assert isinstance(b, OpenVinoBertBackend) and (b.engine, b.precision) == ("openvino", "bf16")
    else:
        assert isinstance(b, OnnxBertBackend) and (b.engine, b.precision) == ("onnx", "fp32")
    assert b.cpu_features == cpu_features(cpu_flags()) and b.precision_reason
    with pytest.raises(ValueError, match="precision='bf16' applies only to BERT models"):
        load_backend("hash:16", precision="bf16")


def test_module_names_what_it_exports() -> None:
    assert set(precision.__all__) >= {"choose", "cpu_flags", "cpu_features", "native_precision", "PRECISIONS"}
    assert precision.PRECISIONS == ("auto", "fp32", "bf16", "int8")
