"""Tasks from Hugging Face ``datasets``: local JSONL / JSON / Parquet / Arrow files (or a dataset
directory / hub id already in the local cache), with a column mapping to the server's task schema.

A row becomes ``TaskItem(prompt, task)``: ``prompt`` from ``prompt_column`` (or ``prompt_template``
formatted with the row), ``task`` from ``task_column`` (a dict already in the server's schema)
or built from ``task_fields`` (task key -> column) over ``task_defaults`` (constants, e.g.
``{"type": "math"}``). With ``streaming`` the file is read lazily (``IterableDataset``): the first
``num_eval_tasks`` rows are held out, the rest stream through a seeded shuffle buffer, and the
stream's state is its position (resume skips that many rows), so large sets never sit in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .tasks import TaskItem

_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".arrow": "arrow", ".csv": "csv"}


class DatasetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(..., description="a local file (jsonl/json/parquet/arrow/csv), a saved dataset dir, or a cached hub id")
    format: Literal["auto", "json", "parquet", "arrow", "csv"] = "auto"
    split: str = "train"
    streaming: bool = False
    shuffle_buffer: int = Field(1000, gt=0, description="streaming: rows in the shuffle buffer")
    id_column: str | None = None
    prompt_column: str = "prompt"
    prompt_template: str | None = Field(None, description="str.format over the row, e.g. '{question}\\nAnswer in \\\\boxed{{}}.'")
    task_column: str | None = Field(None, description="a column holding the server's task object")
    task_fields: dict[str, str] = Field(default_factory=dict, description="task key -> column, e.g. {answer: solution}")
    task_defaults: dict[str, Any] = Field(default_factory=dict, description="constant task keys, e.g. {type: math}")


def _load(dc: DatasetConfig):
    try:
        import datasets
    except ImportError as e:
        raise RuntimeError("dataset: needs the `datasets` package (pip install datasets)") from e
    from pathlib import Path

    p = Path(dc.path)
    if p.is_dir() and (p / "dataset_info.json").exists() and not dc.streaming:
        ds = datasets.load_from_disk(str(p))
        return ds[dc.split] if isinstance(ds, datasets.DatasetDict) else ds
    if p.is_file() or p.is_dir():
        fmt = dc.format if dc.format != "auto" else _FORMATS.get(p.suffix.lower()) if p.is_file() else None
        if fmt is None:
            raise ValueError(f"dataset.path {dc.path}: cannot tell the format; set dataset.format")
        files = str(p) if p.is_file() else sorted(str(x) for x in p.iterdir() if x.suffix.lower() in _FORMATS)
        return datasets.load_dataset(fmt, data_files={dc.split: files}, split=dc.split, streaming=dc.streaming)
    return datasets.load_dataset(dc.path, split=dc.split, streaming=dc.streaming)  # the local hub cache


def row_to_item(dc: DatasetConfig, row: dict[str, Any], index: int) -> TaskItem:
    """One row -> a task; a ValueError names the row and the missing column."""
    try:
        prompt = dc.prompt_template.format(**row) if dc.prompt_template else row[dc.prompt_column]
        if dc.task_column:
            task = dict(row[dc.task_column])
        else:
            task = dict(dc.task_defaults)
            for key, col in dc.task_fields.items():
                task[key] = row[col]
        task = {**dc.task_defaults, **task}
    except KeyError as e:
        raise ValueError(f"dataset row {index}: no column {e} (columns: {sorted(row)})") from None
    if not isinstance(prompt, str):
        raise ValueError(f"dataset row {index}: the prompt is {type(prompt).__name__}, not a string")
    if task.get("type") not in ("math", "code"):
        raise ValueError(f"dataset row {index}: task.type must be 'math' or 'code' (set dataset.task_defaults.type)")
    if "answer" in task and not isinstance(task["answer"], str):
        task["answer"] = str(task["answer"])
    rid = str(row[dc.id_column]) if dc.id_column else f"row-{index}"
    return TaskItem(rid, prompt, task)


def load_split(dc: DatasetConfig, num_train: int, num_eval: int, seed: int) -> tuple[list[TaskItem], list[TaskItem]]:
    """In memory: a seeded shuffle, ``num_eval`` held out, up to ``num_train`` for training."""
    import random

    ds = _load(dc)
    items = [row_to_item(dc, row, i) for i, row in enumerate(ds)]
    if num_eval >= len(items):
        raise ValueError(f"dataset {dc.path}: {len(items)} rows cannot give {num_eval} held-out tasks and a training set")
    random.Random(f"split-{seed}").shuffle(items)
    return items[num_eval : num_eval + num_train], items[:num_eval]


class StreamingTaskStream:
    """The training rows of a streamed dataset, endless: epoch ``e`` is the stream after the
    held-out rows, shuffled with seed ``(seed, e)``. Same interface as ``TaskStream``: ``take``,
    ``position`` (its whole state), ``epoch``."""

    def __init__(self, dc: DatasetConfig, num_eval: int, seed: int, position: int = 0):
        self.dc, self.num_eval, self.seed = dc, num_eval, seed
        self._position = position
        self._it: Iterator[TaskItem] | None = None
        self._epoch_len: int | None = None  # learnt when the first epoch ends (or counted on resume)

    @property
    def position(self) -> int:
        return self._position

    @position.setter
    def position(self, value: int) -> None:  # resume: the next take() reopens the stream there
        self._position = value
        self._it = None

    def _epoch_iter(self, epoch: int, skip: int) -> Iterator[TaskItem]:
        ds = _load(self.dc).skip(self.num_eval).shuffle(seed=self.seed * 1_000_003 + epoch,
                                                        buffer_size=self.dc.shuffle_buffer)
        if skip:
            ds = ds.skip(skip)
        for i, row in enumerate(ds, start=skip):
            yield row_to_item(self.dc, row, self.num_eval + i)

    def _next(self) -> TaskItem:
        while True:
            if self._it is None:
                epoch, within = (0, self._position) if self._epoch_len is None else divmod(self._position,
                                                                                           self._epoch_len)
                self._it = self._epoch_iter(epoch, within)
            try:
                item = next(self._it)
            except StopIteration:
                self._it = None
                if self._epoch_len is None:
                    self._epoch_len = sum(1 for _ in _load(self.dc).skip(self.num_eval))
                    if self._epoch_len == 0:
                        raise ValueError(f"dataset {self.dc.path}: no training rows after {self.num_eval} held out") \
                            from None
                continue
            self._position += 1
            return item

    def take(self, n: int) -> list[TaskItem]:
        return [self._next() for _ in range(n)]

    @property
    def epoch(self) -> int:
        return 0 if self._epoch_len is None else self.position // self._epoch_len


def streaming_eval(dc: DatasetConfig, num_eval: int) -> list[TaskItem]:
    ds = _load(dc).take(num_eval)
    return [row_to_item(dc, row, i) for i, row in enumerate(ds)]
