"""A failed Spark job as a :class:`~densewire.batch.BatchError`: the task's own error, found in the
text of the exception Spark raises on the driver (a Py4J error wrapping a ``SparkException`` whose
message holds the Python worker's traceback; since Spark 4, the ``PythonException`` alone), with the
number of attempts Spark made: from Spark's "failed N times", or else from the attempt the failed
task's block names (0-based, as ``TaskContext.attemptNumber``).

>>> text = ("Job aborted due to stage failure: Task 1 in stage 3.0 failed 4 times, most recent failure: "
...         "Lost task 1.3 in stage 3.0 (TID 9) (127.0.0.1 executor 0): org.apache.spark.api.python."
...         "PythonException: Traceback (most recent call last):\\n  ...\\ndensewire._batch._errors.BatchError: "
...         "invalid_field: a null text (column 'text', row 2, id 17, block 'partition 1 (stage 3, attempt 3), batch 0')\\n")
>>> err = job_error(RuntimeError(text))
>>> err.category, err.column, err.row, err.row_id, err.block
('invalid_field', 'text', 2, 17, 'partition 1 (stage 3, attempt 3), batch 0')
>>> print(err)
invalid_field: a null text; Spark ran the task 4 times (column 'text', row 2, id 17, block 'partition 1 (stage 3, attempt 3), batch 0')
>>> print(job_error(RuntimeError(text.split("most recent failure: ")[1])))  # Spark 4's PythonException
invalid_field: a null text; Spark ran the task 4 times (column 'text', row 2, id 17, block 'partition 1 (stage 3, attempt 3), batch 0')
"""

from __future__ import annotations

import ast
import re
from typing import Any

from .._batch import BatchError

__all__ = ["job_error"]

_BATCH_ERROR = re.compile(r"densewire\._batch\._errors\.BatchError: (\w+): (.*)")
_TIMES = re.compile(r"failed (\d+) times")
_ATTEMPT = re.compile(r"\battempt (\d+)\)")
_WHERE = re.compile(r"^(.*) \((column '.*|row \d.*|id .*|block '.*)\)$")
_PART = re.compile(r"(column|row|id|block) ('(?:[^'\\]|\\.)*'|-?\d+|[^,]+)(?:, |$)")


def job_error(exc: BaseException) -> BaseException:
    """The :class:`BatchError` a task raised, rebuilt from ``exc``'s text (the attempts Spark made
    added to the message), or ``exc`` itself when no task raised one (a Spark error of its own)."""
    text = str(exc)
    found = _BATCH_ERROR.findall(text)
    if not found:
        return exc
    category, rest = found[-1]  # the most recent attempt's
    rest = rest.strip()
    fields: dict[str, Any] = {}
    if (m := _WHERE.match(rest)) is not None:
        message, where = m.group(1), m.group(2)
        for key, value in _PART.findall(where):
            try:
                parsed = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                parsed = value
            fields["row_id" if key == "id" else key] = parsed
    else:
        message = rest
    if (times := _TIMES.search(text)) is not None:  # "Job aborted ... failed 4 times", when Spark's own text is there
        message += f"; Spark ran the task {times.group(1)} times"
    elif (attempt := _ATTEMPT.search(str(fields.get("block", "")))) is not None:  # the block names its attempt
        message += f"; Spark ran the task {int(attempt.group(1)) + 1} times"
    return BatchError(message, category=category, **fields)
