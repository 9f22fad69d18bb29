"""One DecodeError for bytes a source cannot decode, PostgreSQL's pgoutput and MySQL's row
images alike, under the names each decoder had for it."""

from __future__ import annotations

import pickle

import pytest

from airflow_cdc.engine.errors import CdcError, DecodeError, RetriableError
from airflow_cdc.engine.sources.mysql import row_decoder
from airflow_cdc.engine.sources.postgres import pgoutput


def test_both_decoders_raise_the_engines_one_decode_error() -> None:
    assert pgoutput.DecodeError is DecodeError
    assert row_decoder.RowDecodeError is DecodeError
    with pytest.raises(DecodeError, match="unknown pgoutput message type") as caught:
        pgoutput.decode(b"Z")
    assert isinstance(caught.value, CdcError) and not isinstance(caught.value, RetriableError)


def test_a_decode_error_names_the_column_when_there_is_one() -> None:
    whole = DecodeError("message truncated")
    row = DecodeError("c1", "the bytes are not utf-8")
    framing = DecodeError(None, "the rows end 2 bytes past the event's end")
    assert (str(whole), whole.column, whole.reason) == ("message truncated", None, "message truncated")
    assert (str(row), row.column, row.reason) == ("column c1: the bytes are not utf-8", "c1", "the bytes are not utf-8")
    assert (str(framing), framing.column) == ("the rows end 2 bytes past the event's end", None)
    assert str(pickle.loads(pickle.dumps(row))) == str(row)  # crosses a process boundary whole
