"""jsontext: answers written in pieces, matrices a row at a time, as the JSON json.dumps writes."""

import gzip
import json
import math

import pytest

from gradhealth_plugin.serving import jsontext


def _rows(matrix, made):
    for row in matrix:
        made.append(len(made))
        yield list(row)


def test_an_answer_with_rows_reads_as_the_same_answer_with_lists():
    matrix = [[0.5, None, 1e-300], [-0.0, 3, "x"]]
    answer = {"run": "a/b", "values": jsontext.Rows(_rows(matrix, [])), "steps": [0, 10, 20],
              "status": jsontext.Rows(iter([[1, 2, 3], [0, 0, 0]])), "nested": {"k": [1.5]}}
    text = "".join(jsontext.pieces(answer))
    assert json.loads(text) == {"run": "a/b", "values": matrix, "steps": [0, 10, 20],
                                "status": [[1, 2, 3], [0, 0, 0]], "nested": {"k": [1.5]}}
    assert " " not in text.replace("a/b", "")  # compact, as the answers always were


def test_rows_are_made_as_they_are_written_not_before():
    made = []
    pieces = jsontext.pieces({"values": jsontext.Rows(_rows([[1], [2], [3]], made))})
    next(pieces), next(pieces)  # the head, then the key
    assert made == []
    next(pieces)
    assert made == [0]
    assert "".join(pieces) == ",[2],[3]]}" and made == [0, 1, 2]


def test_answers_without_rows_and_empty_ones_are_plain_json():
    for answer in ({}, {"a": 1}, [1, 2], "text", {"values": jsontext.Rows(iter([]))}):
        expected = answer if not isinstance(answer, dict) or not answer.get("values") else {"values": []}
        assert json.loads("".join(jsontext.pieces(answer))) == expected


def test_a_nan_is_refused_in_rows_as_elsewhere():
    with pytest.raises(ValueError):
        "".join(jsontext.pieces({"values": jsontext.Rows(iter([[math.nan]]))}))
    with pytest.raises(ValueError):
        "".join(jsontext.pieces({"values": [math.nan]}))


def test_gzipped_is_the_json_gzipped_and_says_its_length():
    answer = {"layer": "dense_1 \u00e9", "values": jsontext.Rows(iter([[0.25] * 1000, [1.0] * 1000]))}
    data, length = jsontext.gzipped(answer, level=3)
    text = gzip.decompress(data)
    assert json.loads(text) == {"layer": "dense_1 \u00e9", "values": [[0.25] * 1000, [1.0] * 1000]}
    assert length == len(text)
    assert data[4:8] == b"\0\0\0\0"  # no time in the header: the same answer, the same bytes
