"""A raw trace table and the checks every reader runs on it, vectorised over whole
columns (an 82k-row trace reads in well under a second); only when a column is bad does
it search for the first bad line, to name it.

Files may be CSV (plain, ``.gz`` or ``.zst``; a UTF-8 byte-order mark, as spreadsheets
write, is ignored) or Parquet; a pandas DataFrame can be checked the same way.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from shapeshift.errors import InputError

#: Largest time a trace may give, in seconds (about 31.7 years). Beyond it, float
#: arithmetic on event times loses whole seconds, and no real trace comes near it.
MAX_SECONDS = 1e9
#: What the error messages call a DataFrame handed over in Python.
FRAME_PATH = "<DataFrame>"
COMPRESSED = {".gz": "gzip", ".zst": "zstd"}

_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f", ""}


class Table:
    """A raw table plus how to name its rows in error messages."""

    def __init__(self, path: Path, frame: pd.DataFrame, is_csv: bool, header_lines: int = 1):
        self.path = path
        self.frame = frame
        self.is_csv = is_csv
        self.header_lines = header_lines if is_csv else 0

    def line(self, row: int) -> int:
        # CSV: the header is line 1, so data row 0 is line 2 (line 1 for a headerless
        # file). Parquet: 1-based row number.
        return row + 1 + self.header_lines

    def fail(self, row: int, column: str, message: str) -> InputError:
        return InputError(message, path=str(self.path), line=self.line(row), field=column)

    def require(self, columns: tuple[str, ...], fmt: str) -> None:
        missing = [c for c in columns if c not in self.frame.columns]
        if missing:
            raise InputError(
                f"missing required column(s) {', '.join(missing)} for the {fmt} format; "
                f"found: {', '.join(map(str, self.frame.columns)) or 'none'}",
                path=str(self.path),
                line=1 if self.is_csv else None,
                field=missing[0],
            )

    def first(self, mask: np.ndarray) -> int:
        """The first row where ``mask`` is true."""
        return int(np.flatnonzero(mask)[0])

    def present(self, column: str) -> pd.Series:
        values = self.frame[column]
        empty = values.isna() | (values.astype(str).str.strip() == "")
        if empty.any():
            raise self.fail(self.first(empty.to_numpy()), column, "value is missing")
        return values

    def numeric(
        self,
        column: str,
        *,
        integer: bool = False,
        minimum: float = 0.0,
        maximum: float = np.inf,
        required: bool = True,
    ) -> pd.Series:
        values = self.frame[column]
        if not required:
            blank = values.isna() | (values.astype(str).str.strip() == "")
            values = values.where(~blank, None)
        else:
            values = self.present(column)
        numbers = pd.to_numeric(values, errors="coerce")
        bad = numbers.isna() & values.notna()
        if bad.any():
            row = self.first(bad.to_numpy())
            raise self.fail(row, column, f"expected a number, got {values.iloc[row]!r}")
        finite = numbers.dropna()
        if not np.isfinite(finite.to_numpy(dtype=float)).all():
            row = self.first(~np.isfinite(numbers.fillna(0).to_numpy(dtype=float)))
            raise self.fail(row, column, f"expected a finite number, got {values.iloc[row]!r}")
        if integer:
            frac = numbers.notna() & (numbers.fillna(0) % 1 != 0)
            if frac.any():
                row = self.first(frac.to_numpy())
                raise self.fail(row, column, f"expected a whole number, got {values.iloc[row]!r}")
        below = numbers.notna() & (numbers.fillna(minimum) < minimum)
        if below.any():
            row = self.first(below.to_numpy())
            raise self.fail(row, column, f"must be >= {minimum:g}, got {values.iloc[row]!r}")
        above = numbers.notna() & (numbers.fillna(minimum) > maximum)
        if above.any():
            row = self.first(above.to_numpy())
            raise self.fail(row, column, f"must be <= {maximum:g}, got {values.iloc[row]!r}")
        return numbers

    def seconds(self, column: str, *, required: bool = True) -> pd.Series:
        """A duration in seconds: finite, >= 0 and at most ``MAX_SECONDS``."""
        return self.numeric(column, maximum=MAX_SECONDS, required=required)

    def times(self, column: str) -> pd.Series:
        """Seconds after the first submission, from numbers or ISO timestamps."""
        values = self.present(column)
        numbers = pd.to_numeric(values, errors="coerce")
        if not numbers.isna().all() and pd.notna(numbers.iloc[0]):
            # Seconds (the first value is a number): name the first value that is not a
            # finite number, rather than reading the column as timestamps and failing there.
            bad = ~np.isfinite(numbers.to_numpy(dtype=float))
            if bad.any():
                row = self.first(bad)
                raise self.fail(row, column, f"expected a finite number of seconds, got {values.iloc[row]!r}")
        if numbers.notna().all():
            if (numbers < 0).any():
                row = self.first((numbers < 0).to_numpy())
                raise self.fail(row, column, f"must be >= 0, got {values.iloc[row]!r}")
            if (numbers > MAX_SECONDS).any() or not np.isfinite(numbers.to_numpy(dtype=float)).all():
                row = self.first(((numbers > MAX_SECONDS) | ~np.isfinite(numbers)).to_numpy())
                raise self.fail(row, column, f"must be a finite time <= {MAX_SECONDS:g} s, got {values.iloc[row]!r}")
            return numbers.astype(float)
        stamps = pd.to_datetime(values.astype(str), errors="coerce", format="ISO8601")
        if stamps.isna().any():
            row = self.first(stamps.isna().to_numpy())
            raise self.fail(row, column, f"cannot read time {values.iloc[row]!r}; expected seconds or an ISO timestamp")
        if getattr(stamps.dt, "tz", None) is not None:
            stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
        return (stamps - stamps.min()).dt.total_seconds()

    def text(self, column: str, default: str = "") -> pd.Series:
        if column not in self.frame.columns:
            return pd.Series([default] * len(self.frame), dtype=object)
        values = self.frame[column]
        return values.where(values.notna(), default).astype(str).str.strip()

    def flags(self, column: str) -> pd.Series:
        values = self.text(column).str.lower()
        bad = ~values.isin(_TRUE | _FALSE)
        if bad.any():
            row = self.first(bad.to_numpy())
            raise self.fail(row, column, f"expected 0/1 or true/false, got {self.frame[column].iloc[row]!r}")
        return values.isin(_TRUE)

    def unique_ids(self, ids: pd.Series, column: str) -> None:
        dup = ids.duplicated()
        if dup.any():
            row = self.first(dup.to_numpy())
            raise self.fail(row, column, f"duplicate job id {ids.iloc[row]!r}")

    def clock(self, submit: str, others: tuple[str, ...]) -> tuple[pd.Series, dict[str, pd.Series]]:
        """``submit`` as in :meth:`times`, plus further time columns on the same clock
        (blank = NaN, e.g. the start of a job that never started)."""
        base = self.times(submit)
        raw = self.present(submit)
        numeric = pd.to_numeric(raw, errors="coerce").notna().all()
        result: dict[str, pd.Series] = {}
        for column in others:
            if numeric:
                result[column] = self.numeric(column, required=False).astype(float)
                continue
            values = self.text(column)
            blank = values == ""
            stamps = pd.to_datetime(values.where(~blank, None), errors="coerce", format="ISO8601")
            bad = stamps.isna() & ~blank
            if bad.any():
                row = self.first(bad.to_numpy())
                raise self.fail(row, column, f"cannot read time {values.iloc[row]!r}; expected an ISO timestamp")
            if getattr(stamps.dt, "tz", None) is not None:
                stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
            origin = pd.to_datetime(raw.astype(str), format="ISO8601")
            if getattr(origin.dt, "tz", None) is not None:
                origin = origin.dt.tz_convert("UTC").dt.tz_localize(None)
            result[column] = (stamps - origin.min()).dt.total_seconds()
        return base, result

    def choice(self, column: str, allowed: tuple[str, ...]) -> pd.Series:
        """Upper-cased values of ``column``, each one of ``allowed``."""
        values = self.present(column).astype(str).str.strip().str.upper()
        bad = ~values.isin(allowed)
        if bad.any():
            row = self.first(bad.to_numpy())
            raise self.fail(
                row, column, f"unknown value {self.frame[column].iloc[row]!r}; expected one of {', '.join(allowed)}"
            )
        return values


def open_text(path: Path) -> IO[str]:
    """A text handle on ``path``, decompressing ``.gz`` and ``.zst`` and dropping a UTF-8
    byte-order mark."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    if path.suffix == ".zst":
        try:
            import zstandard
        except ImportError:
            raise InputError(
                "reading .zst files needs the 'zstandard' package (pip install zstandard)", path=str(path)
            ) from None
        reader = io.BufferedReader(_ZstdReader(path, zstandard))
        return io.TextIOWrapper(reader, encoding="utf-8-sig", newline="")
    return path.open(encoding="utf-8-sig", newline="")


class _ZstdReader(io.RawIOBase):
    """Decompressed bytes of a ``.zst`` file, frame after frame. Unlike zstandard's own
    stream reader it fails, naming the file, on data that is not zstd and on a file cut
    off inside a frame (which that reader ends silently, as if the file were empty)."""

    CHUNK = 1 << 16

    def __init__(self, path: Path, zstandard: Any):
        self._path = path
        self._zstd = zstandard
        self._file = path.open("rb")
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._started = False  # whether the current frame has been fed any data

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._file.read(self.CHUNK)
            if not chunk:
                if self._started:
                    raise InputError(
                        "truncated zstd data: the file ends inside a compressed frame", path=str(self._path)
                    )
                return 0
            self._feed(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def _feed(self, data: bytes) -> None:
        while data:
            self._started = True
            try:
                self._pending += self._frame.decompress(data)
            except self._zstd.ZstdError as exc:
                raise InputError(f"not valid zstd data: {exc}", path=str(self._path)) from None
            if not self._frame.eof:
                return
            data = self._frame.unused_data  # a further frame follows
            self._frame = self._zstd.ZstdDecompressor().decompressobj()
            self._started = False

    def close(self) -> None:
        self._file.close()
        super().close()


def is_parquet(path: Path) -> bool:
    return path.suffix == ".parquet"


def load_table(path: str | Path, names: tuple[str, ...] | None = None) -> Table:
    """Read a CSV (all cells as text) or Parquet file. ``names``: read a headerless CSV
    with these column names."""
    path = Path(path)
    if not path.exists():
        raise InputError("workload file not found", path=str(path))
    try:
        if is_parquet(path):
            return Table(path, pd.read_parquet(path), is_csv=False)
        with open_text(path) as handle:
            frame = pd.read_csv(
                handle,
                dtype=str,
                keep_default_na=False,
                na_values=[],
                skipinitialspace=True,
                header=None if names else "infer",
                names=list(names) if names else None,
            )
        frame.columns = [str(c).strip() for c in frame.columns]
        return Table(path, frame, is_csv=True, header_lines=0 if names else 1)
    except InputError:
        raise
    except pd.errors.EmptyDataError:
        raise InputError("file is empty", path=str(path)) from None
    except pd.errors.ParserError as exc:
        raise InputError(f"not a readable CSV file: {exc}", path=str(path)) from None
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from None


def frame_table(frame: pd.DataFrame) -> Table:
    """Check a DataFrame handed over in Python like a CSV file: every cell as text, rows
    named by their 1-based position (``<DataFrame>:1`` is the first row)."""
    text = frame.astype(object).where(frame.notna(), "").astype(str)
    text.columns = [str(c).strip() for c in text.columns]
    return Table(Path(FRAME_PATH), text.reset_index(drop=True), is_csv=True, header_lines=0)
