"""The bounded run of the durable-mode crash test (crash.py) inside `make test`: a few
SIGKILL/restart cycles in each sync mode. `make crash` runs a hundred of each."""

import pytest

import crash

CYCLES = 5


@pytest.mark.parametrize("sync", ["fsync", "os"])
def test_kill_9_loses_nothing_acknowledged(sync):
    totals = crash.run(CYCLES, sync)
    assert totals["cycles"] == CYCLES
    # The run did real work in every role, so the checks had something to check.
    assert totals["sends"] > 50, totals
    assert totals["deletes"] > 10, totals
    assert totals["receives"] > 50, totals
    assert totals["checked"] > 50, totals
