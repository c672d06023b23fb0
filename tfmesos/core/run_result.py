"""What ``tfmesos.run`` returns (and ``tfmesos.submit``'s future gives):
``RunResult``, every task's return value by task name (pure: no run, no
TensorFlow)."""

import dataclasses
import reprlib
from collections.abc import ItemsView, Iterator, KeysView
from typing import Any

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60
_repr.maxdict = _repr.maxlist = 8


@dataclasses.dataclass(frozen=True, repr=False)
class RunResult:
    """The values the tasks of one ``tfmesos.run`` returned.

    * ``value``: the chief's, else worker 0's: what ``tfmesos.run``
      returned before it returned them all (``value_task`` names it);
    * ``values``: ``{"worker:0": ..., "worker:1": ..., "ps:0": ...}``, in
      job order (chief, workers, ps, evaluator), of the tasks whose
      function returned a value that came back;
    * ``missing``: ``{task: why}`` of the others: stopped when the run
      ended (a ps serving, a worker still going after the chief returned),
      or a value that could not come back (too big, not picklable here);
    * ``run_id``: the run's (``tfmesos show RUN_ID``).

    ``result["worker:1"]``, ``"worker:1" in result``, ``len(result)``,
    ``for task in result``, ``keys()``, ``items()``, ``get()`` read
    ``values``; a missing task's ``KeyError`` says why it has none.
    Equal when all four are; pickled as its values are; unhashable, as a
    dict.
    """

    values: dict[str, Any]
    value_task: str
    run_id: str
    missing: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value_task not in self.values:
            raise ValueError("RunResult: value_task %r is none of its values' tasks (%s)"
                             % (self.value_task, ", ".join(self.values) or "none"))

    __hash__ = None   # type: ignore[assignment]   # its values are a dict

    @property
    def value(self) -> Any:
        """The chief's return value, else worker 0's."""
        return self.values[self.value_task]

    def __getitem__(self, task: str) -> Any:
        try:
            return self.values[task]
        except KeyError:
            pass
        if task in self.missing:
            raise KeyError("%s has no value: %s" % (task, self.missing[task]))
        raise KeyError("no task %r in run %s; its tasks: %s"
                       % (task, self.run_id, ", ".join(list(self.values) + list(self.missing))))

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __contains__(self, task: object) -> bool:
        return task in self.values

    def keys(self) -> KeysView[str]:
        return self.values.keys()

    def items(self) -> ItemsView[str, Any]:
        return self.values.items()

    def get(self, task: str, default: Any = None) -> Any:
        return self.values.get(task, default)

    def __repr__(self) -> str:
        text = "RunResult(run_id=%r, value=%s (%s), values=%s" % (
            self.run_id, _repr.repr(self.value), self.value_task, _in_order(self.values))
        if self.missing:
            text += ", missing=%s" % _in_order(self.missing)
        return text + ")"


def _in_order(tasks: dict[str, Any]) -> str:
    """``tasks`` as a dict's repr, in task order (reprlib sorts), each value cut short."""
    shown = ["%r: %s" % (task, _repr.repr(value))
             for task, value in list(tasks.items())[:_repr.maxdict]]
    if len(tasks) > _repr.maxdict:
        shown.append("... %d more" % (len(tasks) - _repr.maxdict))
    return "{%s}" % ", ".join(shown)


__all__ = ["RunResult"]
