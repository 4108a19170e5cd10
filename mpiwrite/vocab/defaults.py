"""Every default of a run's settings, written once.

RunConfig (run/config.py) takes its fields' defaults from here, the command line reads them
from RunConfig (config.DEFAULTS), and the engines' stream plans (engines/base.py) default to
the same values.  Part of the shared vocabulary (vocab/: words every layer uses, importing no
folder), so that the engines need not import run/, which imports them.
"""

from mpiwrite.units import MiB

TARGET = "mpiwrite-data"
RESULTS = "results"
SIZE = 256 * MiB  # bytes per rank unless --time or --count
BLOCK = 2**20
FSYNC = True  # one fsync at the end, as lmdd's fsync=1
FSYNC_EVERY = 0  # 0: only the one at the end
DIRECT = False
ITERATIONS = 1
DELAY = 0.0
SAMPLE_INTERVAL = 1.0  # seconds between samples of a stream's bytes
PROGRESS_INTERVAL = 5.0  # seconds between progress messages (0: none)
FILES_PER_DIR = 1000
