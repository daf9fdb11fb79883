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


@pytest.fixture
def mallopts(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "_MALLOPT", lambda param, value: calls.append((param, value)) or 1)
    for _, _, variable, _ in heap._SETTINGS:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    return calls


ARENA_MAX = -8  # mallopt's parameter number (malloc.h)
TUNED = [(ARENA_MAX, 2)]


def test_heaps_are_capped(mallopts):
    assert heap.tune_heaps() == 1
    assert mallopts == TUNED


@pytest.mark.parametrize("name, value", [
    ("MALLOC_ARENA_MAX", "4"),
    ("GLIBC_TUNABLES", "glibc.malloc.arena_max=4"),
    ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1:glibc.malloc.arena_max=4"),
])
def test_a_setting_the_user_made_is_kept(mallopts, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    assert heap.tune_heaps() == 0
    assert mallopts == []


def test_other_tunables_do_not_stop_the_settings(mallopts, monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1000000")
    assert heap.tune_heaps() == 1
    assert mallopts == TUNED


def test_the_reader_tunes_the_heaps(mallopts, tmp_path):
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer

    from gradhealth_plugin.reading import provider

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    provider.Reader(data_provider.MultiplexerDataProvider(multiplexer, str(tmp_path)), multiplexer=multiplexer)
    assert mallopts == TUNED


def test_without_mallopt_the_heaps_are_left_alone(monkeypatch):
    monkeypatch.setattr(heap, "_MALLOPT", None)
    assert heap.tune_heaps() == 0


@pytest.mark.skipif(ctypes.util.find_library("c") is None or not hasattr(ctypes.CDLL(ctypes.util.find_library("c")),
                                                                          "mallopt"),
                    reason="a C library without mallopt")
def test_the_c_library_accepts_the_settings(monkeypatch):
    for _, _, variable, _ in heap._SETTINGS:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert heap._find_mallopt() is not None
    assert heap.tune_heaps() == 1
