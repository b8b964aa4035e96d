"""Every error class survives pickling as itself (a solver's child process sends its error to
the parent that way), with its message, hint and attributes."""

from __future__ import annotations

import pickle

import pytest

from cotenant import errors
from cotenant.errors import (
    CotenantError,
    InfeasibleError,
    InputError,
    InvalidLayoutError,
    NotSupportedError,
    PermanentError,
    TemporaryError,
    UnknownNameError,
)
from cotenant.policies.partition.child import ChildError

EXAMPLES: list[CotenantError] = [
    CotenantError("broken", hint="mend it"),
    InputError("spec.yaml:3:rate", "must be >= 0", hint="a rate in req/s"),
    UnknownNameError("GPU model", "RTX9090", ["A100-40GB", "H100"], "spec.gpu"),
    InvalidLayoutError("GPU 0: 4g and 4g overlap"),
    InfeasibleError("no plan", ["svc-1: no profile meets its SLO"]),
    NotSupportedError("MIG", "T4"),
    TemporaryError("busy", delay_s=2.5, hint="later"),
    PermanentError("no driver"),
    ChildError("ValueError: bad\nvalue"),
]


def test_the_examples_cover_every_error_class() -> None:
    classes = {c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, CotenantError)} | {ChildError}
    assert {type(e) for e in EXAMPLES} == classes


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
def test_an_error_survives_pickling_as_itself(error: CotenantError) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert back.args == error.args
    assert vars(back) == vars(error)
    assert back.one_line() == error.one_line()
    assert "\n" not in back.one_line() or type(error) is not ChildError
