"""heap: freed memory given back to the system once enough was freed, and not on every small read."""

import ctypes.util

import pytest

from gradhealth_plugin.reading import heap


@pytest.fixture
def trims(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "_TRIM", lambda pad: calls.append(pad) or 1)
    monkeypatch.setattr(heap, "_freed", 0)
    return calls


def test_released_once_enough_was_freed_then_counted_afresh(trims):
    heap.freed(heap.RELEASE_EVERY // 2)
    assert trims == []
    heap.freed(heap.RELEASE_EVERY // 2)
    assert trims == [0]
    for _ in range(3):
        heap.freed(heap.RELEASE_EVERY // 4)
    assert trims == [0]
    heap.freed(heap.RELEASE_EVERY // 4)
    assert trims == [0, 0]


def test_nothing_or_a_negative_size_never_releases(trims):
    for _ in range(1000):
        heap.freed(0)
        heap.freed(-heap.RELEASE_EVERY)
    assert trims == []


def test_without_the_call_nothing_happens(monkeypatch):
    monkeypatch.setattr(heap, "_TRIM", None)
    assert heap.release_free_memory() is False
    heap.freed(10 * heap.RELEASE_EVERY)  # no error


@pytest.mark.skipif(ctypes.util.find_library("c") is None or not hasattr(ctypes.CDLL(ctypes.util.find_library("c")),
                                                                          "malloc_trim"),
                    reason="a C library without malloc_trim")
def test_the_c_library_call_is_found_and_runs():
    assert heap._find_trim() is not None
    assert heap.release_free_memory() is True
