"""What part of their runs a table's figures count, said under it (report's notes, the page's):
the runs whose rates count after a --ramp, and the runs with an iteration that never became
steady by its --steady criterion (docs/measurement.md, "A ramp" and "Steady state")."""

from __future__ import annotations

from typing import Any, Dict, List

from mpiwrite.formats.steady import never_steady
from mpiwrite.units import format_seconds


def steady_note(runs) -> str:
    """The runs counted with an iteration that never became steady by its --steady
    criterion, in a line ('' for none)."""
    never = never_steady(runs)
    return (f"{len(never)} run(s) counted had an iteration that never became steady by its "
            f"--steady criterion (e.g. {never[0].run_id}: `mpiwrite show` says more)"
            if never else "")


def window_notes(rows: List[Dict[str, Any]], steady: bool = True) -> List[str]:
    """What part of their runs the rows' figures count (report's and the page's notes): after
    a --ramp, and (`steady`) whether every iteration became steady by its criterion."""
    runs = list({id(r): r for row in rows for r in row.get("_runs", [])}.values())
    ramp_of = [r.params().get("ramp") for r in runs]
    ramped = [float(x) for x in ramp_of if isinstance(x, (int, float)) and x > 0]
    notes = []
    if ramped:
        ramps = sorted(set(ramped))
        notes.append(f"ramp: {len(ramped)} of the {len(runs)} run(s) count their rates after a "
                     f"ramp of {', '.join(format_seconds(x) for x in ramps[:4])}: each "
                     "rank's bytes and time before its end are left out (`mpiwrite show RUN` "
                     "gives the whole run's rate)")
    unsteady = steady_note(runs) if steady else ""
    return notes + ([f"steady: {unsteady}"] if unsteady else [])
