"""Result buffers that cost as much on a process's first call as on its thousandth.

A large result (the 8 MB JSON envelope of 1000 x 1536 float32) is memory the process never had on
its first call: glibc maps it fresh (above its 128 KiB mmap threshold) and the kernel then faults it
in one 4 KiB page at a time as the encoder writes. Later calls find freed heap memory and fault
nothing. Two things here make the first call like the others:

* :class:`OutBuffer` gives an encoder the result's own memory to write into: a ``bytes`` object of
  exactly the size needed, uninitialised (CPython's ``PyBytes_FromStringAndSize(NULL, size)``), and
  a writable numpy view of its storage. No scratch buffer and no copy into the result: one
  allocation of the result's size. (Elsewhere than CPython it is a numpy buffer copied into the
  ``bytes`` at the end.)
* :func:`prefault` asks the kernel to back memory that is not resident yet in one call
  (``MADV_POPULATE_WRITE``, Linux 5.14+), in transparent huge pages where the range covers whole
  2 MiB pages and THP is in ``madvise`` mode (``MADV_HUGEPAGE``), instead of one page fault per
  4 KiB. Memory that is already resident (the heap reused by a warm call) is left as it is: one
  ``mincore`` call tells. Anything the platform lacks makes it a no-op.

The result is an ordinary ``bytes``: immutable once :meth:`OutBuffer.finish` has returned it, since
the view is dropped there, and every call has its own (nothing is pooled, nothing is shared).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import sys

import numpy as np

__all__ = ["OutBuffer", "prefault", "resident"]

_PAGE = mmap.PAGESIZE
_HUGE = 2 << 20  # a transparent huge page on x86-64 and arm64 (4 KiB base pages)
_MADV_HUGEPAGE = 14
_MADV_POPULATE_WRITE = 23
#: below this, faulting pages one at a time costs less than the two system calls
PREFAULT_MIN = 1 << 20


def _bytes_api():
    if sys.implementation.name != "cpython":
        return None
    try:
        new = ctypes.pythonapi.PyBytes_FromStringAndSize
        new.restype, new.argtypes = ctypes.py_object, (ctypes.c_void_p, ctypes.c_ssize_t)
        addr = ctypes.pythonapi.PyBytes_AsString
        addr.restype, addr.argtypes = ctypes.c_void_p, (ctypes.py_object,)
    except (AttributeError, OSError):
        return None
    return new, addr


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise, mincore = libc.madvise, libc.mincore
    except (AttributeError, OSError):
        return None
    madvise.restype, madvise.argtypes = ctypes.c_int, (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    mincore.restype, mincore.argtypes = ctypes.c_int, (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    return madvise, mincore


def _thp_madvise() -> bool:
    """True when transparent huge pages are given to regions that ask (``madvise`` mode); in
    ``always`` mode they need no asking, in ``never`` mode asking does nothing."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[madvise]" in f.read()
    except OSError:
        return False


_BYTES = _bytes_api()
_LIBC = _libc()
_ASK_HUGE = _LIBC is not None and _thp_madvise()
_populate_works = _LIBC is not None  # cleared when the kernel refuses MADV_POPULATE_WRITE (before 5.14)


class _Memory:
    """An address range seen by numpy through ``__array_interface__``; it holds ``owner`` (the bytes
    object whose storage it is), so the view keeps its memory alive."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, addr: int, size: int, owner: object) -> None:
        self.__array_interface__ = {"data": (addr, False), "shape": (size,), "typestr": "|u1", "version": 3}
        self.owner = owner


class OutBuffer:
    """``size`` bytes to write through :attr:`array` (a writable uint8 view), then :meth:`finish` once
    to get them as ``bytes``; every byte must be written before (the memory starts uninitialised).

    >>> out = OutBuffer(5)
    >>> out.array[:] = np.frombuffer(b"hello", np.uint8)
    >>> out.finish()
    b'hello'
    """

    __slots__ = ("array", "_result")

    def __init__(self, size: int) -> None:
        if _BYTES is not None and size >= 2:  # 0 and 1 byte objects may be CPython's shared singletons
            result = _BYTES[0](None, size)
            addr = _BYTES[1](result)
            prefault(addr, size)
            self._result: bytes | None = result
            self.array = np.asarray(_Memory(addr, size, result))
        else:
            self._result = None
            self.array = np.empty(size, np.uint8)

    def finish(self) -> bytes:
        array, self.array = self.array, None
        if self._result is None:
            return array.tobytes()
        result, self._result = self._result, None
        del array  # the last writable view of the result goes with it
        return result


def resident(addr: int, size: int) -> bool | None:
    """Whether every page of the whole pages in ``[addr, addr + size)`` is resident (``mincore``);
    None when it cannot be told."""
    if _LIBC is None:
        return None
    start = -(-addr // _PAGE) * _PAGE
    end = (addr + size) // _PAGE * _PAGE
    if end <= start:
        return None
    vec = np.empty((end - start) // _PAGE, np.uint8)
    if _LIBC[1](start, end - start, vec.ctypes.data) != 0:
        return None
    return bool((vec & 1).all())


def prefault(addr: int, size: int) -> bool:
    """Back ``[addr, addr + size)`` with memory in one go when it is large and not resident yet;
    True when it asked the kernel to. Only the range's whole pages are touched, their contents
    are unchanged (populating anonymous memory writes nothing a program can see)."""
    global _populate_works
    if not _populate_works or size < PREFAULT_MIN or resident(addr, size) is not False:
        return False
    madvise = _LIBC[0]
    start = -(-addr // _PAGE) * _PAGE
    end = (addr + size) // _PAGE * _PAGE
    if _ASK_HUGE:
        hs, he = -(-start // _HUGE) * _HUGE, end // _HUGE * _HUGE
        if he > hs:
            madvise(hs, he - hs, _MADV_HUGEPAGE)  # only a hint: a refusal changes nothing
    if madvise(start, end - start, _MADV_POPULATE_WRITE) != 0:
        if ctypes.get_errno() == errno.EINVAL:
            _populate_works = False  # a kernel before 5.14: pages fault in as they are written, as before
        return False
    return True
